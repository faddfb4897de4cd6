package httpfault

import (
	"os"
	"os/exec"
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
