package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHogsStartAgain: a soak's CPU hog killed from outside is started
// again, and the pool says so (a soak beside two killed hogs said it ran
// beside two); stop leaves none running.
func TestHogsStartAgain(t *testing.T) {
	t.Setenv(cliEnv, "1") // the hogs are this test binary, as `idemcheck spin`
	p, err := startHogs(2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if n := p.note(); n != "" {
		t.Fatalf("no hog died yet: %q", n)
	}
	p.mu.Lock()
	victim := p.cmds[0].Process.Pid
	p.mu.Unlock()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); p.note() == "" && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := p.note(); !strings.HasPrefix(n, "CPU hogs: 1 died during the soak (the first: signal: killed) and were started again") {
		t.Fatalf("note %q", n)
	}
	p.mu.Lock()
	pids := []int{p.cmds[0].Process.Pid, p.cmds[1].Process.Pid}
	p.mu.Unlock()
	if pids[0] == victim {
		t.Fatalf("hog 0 is still the killed process %d", victim)
	}
	p.stop()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("hog %d still runs after stop", pid)
		}
	}
}
