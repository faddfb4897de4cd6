package scenario_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/worker"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// sqliteOptions runs scenarios on SQLite files in a temporary directory,
// with this test binary as the worker command.
func sqliteOptions(t *testing.T, variant string, scenarios ...string) harness.Options {
	t.Helper()
	return harnesstest.Options(t, "sqlite", variant, scenarios...)
}

// TestWorkersScenarioSQLite: worker processes on one SQLite file, killed
// with SIGKILL at failpoints (inside Begin's transaction too) and at random
// moments; the correct store passes every checker, and every planned kill
// happened while orders were in hand (no note says one did not: a kill at
// a moment used to land on a worker already dying, or on none while every
// one was being replaced, and a kill in flight on a call that a dying
// worker had sent: on seed 4 in three runs of three, 5 or 6 kills of 7).
func TestWorkersScenarioSQLite(t *testing.T) {
	for _, seed := range []int64{1, 4} {
		o := sqliteOptions(t, stores.Correct, "workers")
		o.Seed = seed
		workersPass(t, harnesstest.RunOne(t, o))
	}
}

func workersPass(t *testing.T, s results.ScenarioResult) {
	t.Helper()
	if s.Verdict != check.Pass {
		t.Fatalf("verdict %s: %s %v", s.Verdict, s.Error, s.Violations)
	}
	if s.Faults[string(history.FaultWorkerKill)] < 3 {
		t.Errorf("only %d worker kills, want the planned kills at failpoints and moments", s.Faults[string(history.FaultWorkerKill)])
	}
	planned := 0
	for _, line := range s.Schedule {
		if strings.Contains(line, ": kill ") {
			planned++
		}
	}
	if kills := s.Faults[string(history.FaultWorkerKill)]; kills != planned {
		t.Errorf("%d worker kills of %d planned (notes %q)", kills, planned, s.Notes)
	}
	for _, n := range s.Notes {
		if strings.HasPrefix(n, "workers:") {
			t.Errorf("%d worker kills, and %s", s.Faults[string(history.FaultWorkerKill)], n)
		}
	}
	if s.Outcomes["unknown"]+s.Outcomes["claimed"] == 0 {
		t.Errorf("no claims recorded from the workers: %v", s.Outcomes)
	}
}

// TestWorkerClockAlignment: a worker's events carry the harness history's
// time: each call lies between the moment the harness sent the order and
// the moment it read the answer.
func TestWorkerClockAlignment(t *testing.T) {
	o := sqliteOptions(t, stores.Correct)
	env := testEnv(t, o, "align")
	w, err := env.StartWorker(context.Background(), worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sent := env.Hist.Now()
	w.Submit(env.Order(0, ""))
	<-w.Answered()
	got := env.Hist.Now()
	w.Close()
	<-w.Done()
	ops := env.Hist.Ops()
	if len(ops) < 2 {
		t.Fatalf("%d ops recorded, want Begin and Complete", len(ops))
	}
	for _, op := range ops {
		if op.Call < sent || op.Return > got || op.Return < op.Call {
			t.Errorf("op %v [%d, %d] outside [%d, %d]: the worker's clock is not the history's", op.Input.Kind, op.Call, op.Return, sent, got)
		}
	}
	if w.Err() != nil {
		t.Errorf("worker: %v", w.Err())
	}
}

// TestWorkerTakesAnyBacklog: a worker held at a failpoint still reads
// every order it is given, so the harness's go behind them reaches it.
// Orders past what its queue and the pipe held once deadlocked the two:
// the worker's reader waited on its full queue, the order in hand on a
// go unread behind it, the harness's writes on the full pipe (a chaos
// run on a store slowed by a loaded machine hung for half an hour).
func TestWorkerTakesAnyBacklog(t *testing.T) {
	o := sqliteOptions(t, stores.Correct)
	env := testEnv(t, o, "backlog")
	var hits atomic.Int32
	w, err := env.StartWorker(context.Background(), worker.Options{
		Announce: []string{faults.RunAfterClaim},
		Decide: func(*worker.Worker, string, stores.KeyRef) worker.Action {
			if hits.Add(1) == 1 {
				return worker.Action{Hold: 300 * time.Millisecond} // while the orders pile up
			}
			return worker.Action{Kill: true} // the next order's claim: the backlog was read
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Kill("", stores.KeyRef{}) })
	const orders = 6000 // past the queue the worker once had (4096) and a pipe's worth
	given := make(chan struct{})
	go func() {
		defer close(given)
		for i := 0; i < orders; i++ {
			w.Submit(env.Order(i, ""))
		}
	}()
	select {
	case <-given:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the harness could not give a held worker %d orders: they deadlocked", orders)
	}
	select {
	case <-w.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the held worker never went on to its next order: the harness's go did not reach it")
	}
	if !w.Killed() || hits.Load() < 2 {
		t.Errorf("the worker was not killed at its second order (killed %v, %d failpoint hits)", w.Killed(), hits.Load())
	}
	if n := w.Backlog(); n < orders-2 {
		t.Errorf("backlog %d after %d orders and one answer", n, orders)
	}
}

// TestWorkerKilledInFlight: a worker killed while its Begin is in flight
// (held inside SQLite's transaction, holding the file's write lock) leaves
// an unknown outcome in the history, its transaction rolled back and the
// lock free; a worker killed after its claim leaves the claim behind, in
// flight, for another to take over after LockTTL.
func TestWorkerKilledInFlight(t *testing.T) {
	o := sqliteOptions(t, stores.Correct)
	env := testEnv(t, o, "inflight")
	ctx := context.Background()
	w, err := env.StartWorker(ctx, worker.Options{
		Announce: []string{faults.BeginBeforeCommit, faults.RunAfterClaim},
		Decide:   func(*worker.Worker, string, stores.KeyRef) worker.Action { return worker.Action{Kill: true} },
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(env.Order(0, ""))
	<-w.Done()
	if !w.Killed() {
		t.Fatal("worker not killed")
	}
	ops := env.Hist.Ops()
	if len(ops) != 1 || !ops[0].Output.Unknown || ops[0].Return != history.Never {
		t.Fatalf("ops %+v, want one unknown Begin", ops)
	}
	// The transaction rolled back: the key is free, and the file writable.
	d, err := env.Store.Begin(ctx, stores.Request{KeyRef: env.Order(0, "").Key, Fingerprint: env.Order(0, "").Fingerprint, Now: time.Now()})
	if err != nil || d.Outcome != stores.Claimed || d.Takeover {
		t.Fatalf("after the kill inside Begin: %+v, %v; want a fresh claim", d, err)
	}

	// Killed after the claim: the claim stays (durable), in flight.
	w2, err := env.StartWorker(ctx, worker.Options{
		Announce: []string{faults.RunAfterClaim},
		Decide:   func(*worker.Worker, string, stores.KeyRef) worker.Action { return worker.Action{Kill: true} },
	})
	if err != nil {
		t.Fatal(err)
	}
	o1 := env.Order(1, "")
	w2.Submit(o1)
	<-w2.Done()
	d, err = env.Store.Begin(ctx, stores.Request{KeyRef: o1.Key, Fingerprint: o1.Fingerprint, Now: time.Now()})
	if err != nil || d.Outcome != stores.InFlight {
		t.Fatalf("after the kill past the claim: %+v, %v; want in flight", d, err)
	}
	d, err = env.Store.Begin(ctx, stores.Request{KeyRef: o1.Key, Fingerprint: o1.Fingerprint, Now: time.Now().Add(env.Config.LockTTL)})
	if err != nil || d.Outcome != stores.Claimed || !d.Takeover {
		t.Fatalf("after LockTTL: %+v, %v; want a takeover", d, err)
	}
	var kills int
	for _, f := range env.Hist.Faults() {
		if f.Kind == history.FaultWorkerKill {
			kills++
		}
	}
	if kills != 2 {
		t.Errorf("%d worker-kill faults recorded, want 2", kills)
	}
}

// testEnv opens a store for one test the way the runner does for a
// scenario, and closes it when the test ends.
func testEnv(t *testing.T, o harness.Options, name string) *scenario.Env {
	t.Helper()
	env, err := o.NewEnv(context.Background(), scenario.Scenario{Name: name}, name, harness.NewRunID(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Store.Close() })
	return env
}

// TestWorkersScenarioCatchesRace: the checkers see across processes: two
// worker processes running select-then-insert both claim a key. Whether
// two processes meet inside the read-to-write window of one round is
// timing (about half the seeds of `idemcheck check --scenario workers`
// catch it), so the test runs five repetitions, each on its own store
// and seed, and five more on another seed only if none killed it: the
// mutant must die in one. Five alone survived once in a loaded suite
// (about one in 32, were the rounds independent); ten, one in a
// thousand.
func TestWorkersScenarioCatchesRace(t *testing.T) {
	o := sqliteOptions(t, "select-then-insert", "workers")
	o.Count = 5
	var ran []results.ScenarioResult
	for _, seed := range []int64{1, 2} {
		o.Seed = seed
		sum, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Verdict == check.Fail {
			return
		}
		ran = append(ran, sum.Scenarios...)
	}
	for _, s := range ran {
		harnesstest.Log(t, s)
	}
	t.Fatalf("select-then-insert survived %d repetitions of the workers scenario", len(ran))
}

// TestWorkersSkip: the memory store, a factory, or no worker command:
// the workers scenario says why it cannot run.
func TestWorkersSkip(t *testing.T) {
	o := harnesstest.Options(t, "memory", stores.Correct, "workers")
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if s := sum.Scenarios[0]; s.Verdict != check.Skipped || !strings.Contains(s.Skipped, "one process") {
		t.Errorf("memory: %s %q", s.Verdict, s.Skipped)
	}
	if sum.Verdict != check.Skipped {
		t.Errorf("a run whose one scenario was skipped judged nothing, but its verdict is %s", sum.Verdict)
	}
	sq, _ := stores.Lookup("sqlite")
	o.Backend, o.WorkerCommand = sq, nil
	if why := scenario.WorkersSkip(o.Caps()); !strings.Contains(why, "worker command") {
		t.Errorf("no worker command: %q", why)
	}
}

// TestSQLiteKillDurability: claims and answers that SQLite acknowledged to
// a worker process survive that process being killed with SIGKILL: ten
// workers each claim a key and are killed right after the claim (holding
// the file open), another saves ten answers and is killed too; a fresh
// store on the file then finds every claim in flight and every answer.
func TestSQLiteKillDurability(t *testing.T) {
	const n = 10
	o := sqliteOptions(t, stores.Correct)
	o.LockTTL = time.Minute // claims stay in flight for the whole test
	env := testEnv(t, o, "durability")
	ctx := context.Background()
	kill := func(*worker.Worker, string, stores.KeyRef) worker.Action { return worker.Action{Kill: true} }
	for i := 0; i < n; i++ {
		w, err := env.StartWorker(ctx, worker.Options{Announce: []string{faults.RunAfterClaim}, Decide: kill})
		if err != nil {
			t.Fatal(err)
		}
		w.Submit(env.Order(i, ""))
		<-w.Done()
	}
	w, err := env.StartWorker(ctx, worker.Options{Announce: []string{faults.RunAfterComplete}, Decide: func(w *worker.Worker, _ string, k stores.KeyRef) worker.Action {
		return worker.Action{Kill: k == env.Order(2*n-1, "").Key}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := n; i < 2*n; i++ {
		w.Submit(env.Order(i, ""))
	}
	<-w.Done()
	claims, done := 0, 0
	for _, op := range env.Hist.Ops() {
		switch {
		case op.IsClaim():
			claims++
		case op.Accepted(models.Complete):
			done++
		}
	}
	b, _ := stores.Lookup("sqlite")
	fresh, err := b.Open(ctx, env.Addr(), env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	inFlight, replays := 0, 0
	for i := 0; i < 2*n; i++ {
		o := env.Order(i, "")
		d, err := fresh.Begin(ctx, stores.Request{KeyRef: o.Key, Fingerprint: o.Fingerprint, Now: time.Now()})
		switch {
		case err != nil:
			t.Fatalf("key %d: %v", i, err)
		case i < n && d.Outcome == stores.InFlight:
			inFlight++
		case i >= n && d.Outcome == stores.Replay:
			replays++
		default:
			t.Errorf("key %d after the kills: %+v", i, d)
		}
	}
	t.Logf("claims acknowledged before SIGKILL: %d (%d saved done); after: %d in flight, %d replayed", claims, done, inFlight, replays)
	if claims != 2*n || done != n || inFlight != n || replays != n {
		t.Errorf("lost across kill -9: %d claims, %d done before; %d in flight, %d replays after", claims, done, inFlight, replays)
	}
}
