package idemtest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// wholeSeconds is this repository's memory store on a clock that counts
// in whole seconds, as a store keeping its times as unix seconds does:
// it reads each Begin's and Prune's time to the second, and a claim goes
// stale once its lock and now, so read, are more than its LockTTL
// (rounded up to a second) apart (the inner store's LockTTL a second
// more); a record likewise. It holds a claim from its LockTTL to a second
// past it rounded up, never less: correct, and it failed the suite with
// nothing to declare.
type wholeSeconds struct{ stores.Store }

func (s wholeSeconds) Begin(ctx context.Context, r stores.Request) (stores.Decision, error) {
	now := r.Now
	r.Now = now.Truncate(time.Second)
	d, err := s.Store.Begin(ctx, r)
	if !d.DecidedAt.IsZero() {
		d.DecidedAt = now // a caller-clock store decides at the request's Now
	}
	return d, err
}

func (s wholeSeconds) Prune(ctx context.Context, now time.Time) (int, error) {
	return s.Store.Prune(ctx, now.Truncate(time.Second))
}

// wholeSecondsFactory opens wholeSeconds, declaring its clock step when
// step is set.
func wholeSecondsFactory(step bool) idemtest.Factory {
	up := func(d time.Duration) time.Duration { return (d+time.Second-1)/time.Second*time.Second + time.Second }
	f := idemtest.Factory{Name: "memory-whole-seconds", Clock: stores.CallerClock, WaitsAnnounced: true,
		Open: func(cfg stores.Config) (stores.Store, error) {
			cfg.LockTTL, cfg.Retention = up(cfg.LockTTL), up(cfg.Retention)
			s, err := memory.New(cfg)
			if err != nil {
				return nil, err
			}
			return wholeSeconds{s}, nil
		}}
	if step {
		f.Semantics.ClockStep = time.Second
	}
	return f
}

// TestClockStepUndeclared: the whole-second store, its step undeclared,
// fails where the model wants its claims stale at the LockTTL, and the
// failure names the declaration.
func TestClockStepUndeclared(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.Run(t, wholeSecondsFactory(false))
		return
	}
	wantSuiteFails(t, "TestClockStepUndeclared", "--- FAIL: TestClockStepUndeclared/sched-takeover", "stores.Semantics{ClockStep: time.Second}")
}

// TestClockStepDeclared: declared, the same store passes the whole
// suite; its bug of rounding down (a claim stale once its lock and now,
// read to the second, are its LockTTL apart: up to a second early) still
// fails.
func TestClockStepDeclared(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		f := wholeSecondsFactory(true)
		if os.Getenv("IDEMTEST_ROUND_DOWN") == "1" {
			open := f.Open
			f.Open = func(cfg stores.Config) (stores.Store, error) {
				s, err := open(cfg)
				if err != nil {
					return nil, err
				}
				in := s.(wholeSeconds).Store
				_ = in.Close()
				cfg.LockTTL = (cfg.LockTTL + time.Second - 1) / time.Second * time.Second
				m, err := memory.New(cfg)
				return wholeSeconds{m}, err
			}
		}
		idemtest.Run(t, f)
		return
	}
	res := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClockStepDeclared$", "-test.v", "-rapid.nofailfile")
	cmd.Env = append(withoutEnv(idemtest.RequireJudgedEnv), childEnv+"=1", "IDEM_RESULTS="+res)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the suite failed the whole-second store with its step declared: %v\n%s", err, out)
	}
	// Its passing runs' directories are removed, and latest with them
	// (left, it pointed at nothing).
	if to, err := os.Readlink(filepath.Join(res, "latest")); err == nil {
		t.Errorf("latest left pointing at %s, removed", to)
	}
	if !strings.Contains(string(out), "--- PASS: TestClockStepDeclared/sched-takeover") {
		t.Errorf("sched-takeover did not pass:\n%s", out)
	}
	cmd = exec.Command(os.Args[0], "-test.run=^TestClockStepDeclared$", "-test.v", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), childEnv+"=1", "IDEMTEST_ROUND_DOWN=1", "IDEM_RESULTS="+t.TempDir())
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--- FAIL: TestClockStepDeclared/") {
		t.Errorf("the store that rounds its lease down passed with its step declared: %v\n%s", err, out)
	}
}
