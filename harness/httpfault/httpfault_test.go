package httpfault

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// state reads a process's state letter from /proc (T: stopped).
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

// TestInstanceLifecycle: a real process is paused (stopped), resumed,
// killed with its children, and started again; a command that exits is
// reported as such by Ready, with its exit.
func TestInstanceLifecycle(t *testing.T) {
	log, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	in := NewInstance("i1", 12345, "echo port={port} $PORT; sleep 30", nil, log)
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	pid := in.proc.Process.Pid
	var out []byte
	for wait := time.Now().Add(5 * time.Second); len(out) == 0 && time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
		out, _ = os.ReadFile(log.Name())
	}
	if !strings.Contains(string(out), "port=12345 12345") {
		t.Errorf("the command did not get its port: %q", out)
	}
	if err := in.Pause(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second) // only a failure waits it out
	for state(t, pid) != "T" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := state(t, pid); s != "T" {
		t.Fatalf("paused instance in state %s, want T (stopped)", s)
	}
	if err := in.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in.done:
	default:
		t.Fatal("Kill returned before the process exited")
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	if in.proc.Process.Pid == pid {
		t.Fatal("restart reused the old process")
	}
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}

	bad := NewInstance("i2", 12346, "exit 3", nil, log)
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	err = bad.Ready(context.Background(), 5*time.Second, func(context.Context, string) error { return errors.New("no answer") })
	if err == nil || !strings.Contains(err.Error(), "exited before it answered") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Ready on an exited instance: %v", err)
	}
}

// TestSupervisorRestartsACrash: an instance that exits by itself is
// recorded (when, its exit status, its log's tail), restarted, and its
// exit is a window in the history; a kill is not a crash.
func TestSupervisorRestartsACrash(t *testing.T) {
	h := history.New()
	marker := filepath.Join(t.TempDir(), "started")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sup := NewSupervisor(ctx, h, func(context.Context, *Instance) error { return nil })
	in := NewInstance("i1", 12347, "if [ -e "+marker+" ]; then exec sleep 30; fi; touch "+marker+"; echo boom; exit 7", nil, nil)
	sup.Watch(in)
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(sup.Crashes()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	sup.Wait()
	cs := sup.Crashes()
	if len(cs) != 1 {
		t.Fatalf("crashes %+v, want one", cs)
	}
	c := cs[0]
	if c.Instance != "i1" || c.Status != "exit status 7" || c.LogTail != "boom" || c.Restarted == 0 || c.Err != "" {
		t.Errorf("crash %+v", c)
	}
	if !in.running() {
		t.Error("the instance was not restarted")
	}
	if err := in.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	sup.Wait()
	if n := len(sup.Crashes()); n != 1 {
		t.Errorf("a kill was recorded as a crash: %d crashes", n)
	}
	fs := h.Faults()
	if len(fs) != 1 || fs[0].Kind != history.FaultInstanceExit || fs[0].Start != c.At || fs[0].End != c.Restarted {
		t.Errorf("faults %+v", fs)
	}
}

// TestKillOutlivesADetachedChild: a service that starts a process
// outside its group (setsid; Node's spawn with detached: true and its
// stdio inherited) leaves the output pipe open after a kill. Kill waited
// for that process too, and the run hung until a second signal; it now
// ends once the instance is gone and its output has had pipeWait.
func TestKillOutlivesADetachedChild(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	var log strings.Builder
	in := NewInstance("i1", 12348, "setsid sh -c 'echo $$ > "+pidFile+"; exec sleep 60' & exec sleep 60", nil, &syncWriter{w: &log})
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
	}
	killed := make(chan error, 1)
	go func() { killed <- in.Kill() }()
	select {
	case err := <-killed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Kill still waiting 30 s on: it waits for the detached process that holds the instance's output")
	}
	// And the detached process went with it: it carries the instance's
	// marker, and an instance killed dies whole.
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil || zombie(pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the detached process %d outlived the instance's kill", pid)
		}
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestKilledAndNotBack: an instance killed whose restart never answers
// is no fault that was not injected: Run names it among the instances
// down, which the rest of the run went without (a run passed saying
// nothing of it).
func TestKilledAndNotBack(t *testing.T) {
	in := NewInstance("i1", 12349, "sleep 60", nil, nil)
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Kill() })
	h := history.New()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s := Schedule{Seed: 1, Process: true, Gap: 100 * time.Millisecond, Window: 50 * time.Millisecond,
		Ready: func(context.Context, *Instance) error { return errors.New("nothing listens") }}
	problems, down := s.Run(ctx, h, []string{"i1"}, []*Instance{in}, nil)
	killed := slices.ContainsFunc(h.Faults(), func(f history.Fault) bool { return f.Kind == history.FaultInstanceKill })
	if !killed {
		t.Fatal("no kill drawn in 2 s (seed 1 draws several)")
	}
	if len(down) != 1 || !strings.Contains(down[0], "instance i1, killed at") || !strings.Contains(down[0], "did not come back: nothing listens") {
		t.Errorf("down %q, want i1 named once", down)
	}
	for _, p := range problems {
		if strings.Contains(p, "nothing listens") {
			t.Errorf("a restart that never answered is among the faults not injected: %q", p)
		}
	}
}
