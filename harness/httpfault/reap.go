package httpfault

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// The instances a run starts are process groups of their own (so a kill
// or a pause reaches a shell's children). A run that is itself killed
// with SIGKILL cannot stop them; so each running instance is registered
// in RegistryDir under a name that holds the run's process id and the
// group's, with the group leader's start time inside, and the next run
// (Reap) kills the groups of runs that are gone, as harness/servers
// removes the containers of killed runs.

// RegistryDir is where running instances are registered.
var RegistryDir = filepath.Join(os.TempDir(), "idemcheck-instances")

// markerEnv names the variable every instance is started with, its value
// a marker of the instance's own (newMarker), which its children inherit.
// Reap finds by it the processes of an instance whose group leader is
// gone: Debian's sh does not exec the last command of `sh -c 'VAR=x
// prog'`, so the service is the shell's child, and a killed run's
// Pdeathsig killed only the shell; the next run saw the leader gone and
// left the service running.
const markerEnv = "IDEMCHECK_INSTANCE"

// markers numbers this process's markers.
var markers atomic.Int64

// newMarker is a marker no other instance has: this process's id and
// start time, and a number.
func newMarker() string {
	st, _ := startTime(os.Getpid())
	return fmt.Sprintf("%d.%s.%d", os.Getpid(), st, markers.Add(1))
}

// register records that this process started the process group pgid,
// whose processes carry marker in markerEnv.
func register(pgid int, marker string) {
	start, err := startTime(pgid)
	if err != nil {
		return
	}
	_ = os.MkdirAll(RegistryDir, 0o755)
	_ = os.WriteFile(entry(os.Getpid(), pgid), []byte(start+"\n"+marker), 0o644)
}

// unregister forgets the process group pgid (it has exited).
func unregister(pgid int) { _ = os.Remove(entry(os.Getpid(), pgid)) }

func entry(owner, pgid int) string {
	return filepath.Join(RegistryDir, fmt.Sprintf("%d.%d", owner, pgid))
}

// Reap kills the process groups of instances whose run is gone (killed
// before it could stop them) and says how many it killed. A group whose
// leader is no longer the process that was registered (its start time
// differs: the id was reused) is left alone; the processes that carry
// the instance's marker (markerEnv) are killed whatever their group
// and its leader.
func Reap() (int, error) {
	entries, err := os.ReadDir(RegistryDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	killed := 0
	for _, e := range entries {
		owner, pgid, ok := parseEntry(e.Name())
		if !ok || alive(owner) {
			continue
		}
		path := filepath.Join(RegistryDir, e.Name())
		raw, _ := os.ReadFile(path)
		stamp, marker, _ := strings.Cut(string(raw), "\n")
		hit := false
		if got, err := startTime(pgid); err == nil && got == stamp {
			hit = syscall.Kill(-pgid, syscall.SIGKILL) == nil
		}
		if marker != "" && killMarked(marker) > 0 {
			hit = true
		}
		if hit {
			killed++
		}
		_ = os.Remove(path)
	}
	return killed, nil
}

// killMarked kills every process whose environment carries marker in
// markerEnv, and says how many.
func killMarked(marker string) int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := []byte(markerEnv + "=" + marker + "\x00")
	n := 0
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", p.Name(), "environ"))
		if err != nil || !(bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...))) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

func parseEntry(name string) (owner, pgid int, ok bool) {
	a, b, found := strings.Cut(name, ".")
	owner, err1 := strconv.Atoi(a)
	pgid, err2 := strconv.Atoi(b)
	return owner, pgid, found && err1 == nil && err2 == nil && owner > 0 && pgid > 0
}

// alive reports whether a process with this id exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// startTime is the process's start time, in clock ticks since boot
// (/proc/<pid>/stat, field 22): with the id, it names one process.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return fields[19], nil // field 22 of the whole line
}
