package sched_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/sched"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/sqlite"
)

// TestSQLiteWriteLockHolderIsDetected: on a real SQLite file, A parks inside
// its Begin at begin.before-commit, holding the write lock; B, let run,
// finds the lock taken and parks at store.wait-turn (faults.Wait) instead
// of blocking where the scheduler cannot see: its wait is an event, not a
// timeout, so the same choices give the same run however loaded the
// machine is. A commits, and B then answers (in flight: A's claim).
// Nobody waits for SQLite's busy timeout.
func TestSQLiteWriteLockHolderIsDetected(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.New(ctx, filepath.Join(t.TempDir(), "k.db"), stores.Config{LockTTL: time.Second, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	req := stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: "k"}, Fingerprint: "fp", Now: now}
	var da, db stores.Decision
	var ea, eb error
	s := sched.New(sched.NewScript(
		sched.Step{Client: "A", Until: []string{faults.BeginBeforeCommit}},
		sched.Step{Client: "B", ToEnd: true}, // through store.round-trip, into the lock wait
	), sched.Options{
		// Long enough that B's read before its write transaction, slow
		// under -race beside the other test pass, is not taken for a block
		// (at 100 ms it was; 1 s is a stall CI's load can reach); short of
		// the busy timeout (5 s), so a lock wait without its event still
		// shows as a block. It costs nothing when the test passes.
		Block: 4 * time.Second, Stuck: 20 * time.Second})
	s.Client("A", func(ctx context.Context) {
		if faults.Hit(ctx, "start") == nil {
			da, ea = st.Begin(ctx, req)
		}
	})
	s.Client("B", func(ctx context.Context) {
		if faults.Hit(ctx, "start") == nil {
			db, eb = st.Begin(ctx, req)
		}
	})
	start := time.Now()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ea != nil || eb != nil {
		t.Fatalf("A: %v, B: %v", ea, eb)
	}
	if da.Outcome != stores.Claimed || db.Outcome != stores.InFlight {
		t.Errorf("A %v, B %v; want claimed and in flight", da.Outcome, db.Outcome)
	}
	waited := false
	for _, e := range s.Log() {
		if e.Kind == sched.Parked && e.Client == "B" && e.Failpoint == faults.WaitTurn {
			waited = true
		}
		if e.Kind == sched.Blocked {
			t.Errorf("%s was taken for blocked after a timeout: a wait for the write lock must be an event", e.Client)
		}
	}
	if !waited {
		t.Errorf("B's wait for the write lock was not seen: %v", s.Log())
	}
	if d := time.Since(start); d >= sqlite.BusyTimeout {
		t.Errorf("took %v: someone waited for the busy timeout", d)
	}
}
