package httpfault

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReapKillsInstancesOfKilledRuns: an instance registered by a run
// that is gone (a pid no process has) is killed by the next run's Reap;
// one registered by a live run, and one whose group id was reused by
// another process (another start time), are left alone.
func TestReapKillsInstancesOfKilledRuns(t *testing.T) {
	RegistryDir = t.TempDir()
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	gone := exec.Command("true") // a run that has ended: its pid is free
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	orphan, kept, reused := start(), start(), start()
	write := func(owner, pgid int, stamp string) {
		if err := os.WriteFile(entry(owner, pgid), []byte(stamp), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := startTime(orphan.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	write(gone.Process.Pid, orphan.Process.Pid, st)
	stKept, _ := startTime(kept.Process.Pid)
	write(os.Getpid(), kept.Process.Pid, stKept)     // this run is alive
	write(gone.Process.Pid, reused.Process.Pid, "1") // another process now has the id
	n, err := Reap()
	if err != nil || n != 1 {
		t.Fatalf("Reap killed %d (%v), want 1", n, err)
	}
	done := make(chan error, 1)
	go func() { done <- orphan.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphaned instance still runs")
	}
	for _, c := range []*exec.Cmd{kept, reused} {
		if !alive(c.Process.Pid) {
			t.Errorf("pid %d was killed", c.Process.Pid)
		}
	}
}

// instanceParentEnv makes the test binary a run that starts one instance
// (writing its pid to the file the variable names) and waits to be
// killed (TestInstanceDiesWithItsRun).
const instanceParentEnv = "IDEM_HTTPFAULT_TEST_PARENT"

// TestInstanceDiesWithItsRun: an instance dies with the run that started
// it when that run is killed with SIGKILL (Pdeathsig), there and then;
// a killed run's instances ran on until the next run reaped them.
func TestInstanceDiesWithItsRun(t *testing.T) {
	if f := os.Getenv(instanceParentEnv); f != "" {
		in := NewInstance("i", 0, "echo $$ > "+f+".tmp && mv "+f+".tmp "+f+" && exec sleep 60", nil, nil)
		if err := in.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		return
	}
	RegistryDir = t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	parent := exec.Command(os.Args[0], "-test.run=^TestInstanceDiesWithItsRun$")
	parent.Env = append(os.Environ(), instanceParentEnv+"="+pidFile, "TMPDIR="+t.TempDir())
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = parent.Process.Kill()
			t.Fatal("the instance never started")
		}
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	running := func() bool { // alive, and not a zombie that no init reaps
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err == nil && !strings.Contains(string(b), ") Z ")
	}
	for deadline := time.Now().Add(10 * time.Second); running(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the instance outlived its killed run")
		}
	}
}

// TestReapKillsAShellsOrphans: a run killed with SIGKILL leaves the
// service a shell started (sh -c 'VAR=x prog': Debian's sh runs prog as
// its child), whose group leader, the shell, died with the run
// (Pdeathsig). The next run's Reap finds the service by its instance's
// marker and kills it; it found the leader gone and left it running.
func TestReapKillsAShellsOrphans(t *testing.T) {
	RegistryDir = t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	marker := newMarker()
	shell := exec.Command("/bin/sh", "-c", "X=1 sleep 60 & echo $! > "+pidFile)
	shell.Env = append(os.Environ(), markerEnv+"="+marker)
	shell.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := startTime(shell.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := shell.Wait(); err != nil { // the leader is gone, its child runs on
		t.Fatal(err)
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	gone := exec.Command("true") // the killed run: its pid is free
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry(gone.Process.Pid, shell.Process.Pid), []byte(st+"\n"+marker), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := Reap(); err != nil || n != 1 {
		t.Fatalf("Reap killed %d (%v), want 1", n, err)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(child) && !zombie(child); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the shell's orphaned child still runs")
		}
	}
}

// zombie reports whether pid has exited and waits to be reaped by its
// parent (init, here).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}
