package httpfault

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// register records that this process started the process group pgid.
func register(pgid int) {
	start, err := startTime(pgid)
	if err != nil {
		return
	}
	_ = os.MkdirAll(RegistryDir, 0o755)
	_ = os.WriteFile(entry(os.Getpid(), pgid), []byte(start), 0o644)
}

// unregister forgets the process group pgid (it has exited).
func unregister(pgid int) { _ = os.Remove(entry(os.Getpid(), pgid)) }

func entry(owner, pgid int) string {
	return filepath.Join(RegistryDir, fmt.Sprintf("%d.%d", owner, pgid))
}

// Reap kills the process groups of instances whose run is gone (killed
// before it could stop them) and says how many it killed. A group whose
// leader is no longer the process that was registered (its start time
// differs: the id was reused) is left alone.
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
		want, _ := os.ReadFile(path)
		if got, err := startTime(pgid); err == nil && got == string(want) {
			if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		_ = os.Remove(path)
	}
	return killed, nil
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
