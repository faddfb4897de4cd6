package harness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// sqliteOptions runs scenarios on SQLite files in a temporary directory,
// with this test binary as the worker command.
func sqliteOptions(t *testing.T, variant string, scenarios ...string) Options {
	t.Helper()
	b, err := stores.Lookup("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Backend, o.Variant, o.Scenarios, o.Addr = b, variant, scenarios, t.TempDir()
	o.WorkerCommand = testWorkerCommand(t)
	return o
}

func logScenario(t *testing.T, s ScenarioResult) {
	t.Helper()
	t.Logf("%s: %s, %d ops, faults %v, outcomes %v, %.1fs %s", s.Name, s.Verdict, s.Ops, s.Faults, s.Outcomes, s.Seconds, s.Error)
	for _, l := range s.Schedule {
		t.Logf("  schedule: %s", l)
	}
	for _, c := range s.Checkers {
		if c.Verdict != Pass {
			t.Logf("  %s: %s: %s", c.Checker, c.Verdict, c.Detail)
		}
	}
}

// TestWorkersScenarioSQLite: worker processes on one SQLite file, killed
// with SIGKILL at failpoints (inside Begin's transaction too) and at random
// moments; the correct store passes every checker.
func TestWorkersScenarioSQLite(t *testing.T) {
	sum, err := Run(context.Background(), sqliteOptions(t, stores.Correct, "workers"))
	if err != nil {
		t.Fatal(err)
	}
	s := sum.Scenarios[0]
	logScenario(t, s)
	if s.Verdict != Pass {
		t.Fatalf("verdict %s: %s %v", s.Verdict, s.Error, s.Violations)
	}
	if s.Faults[FaultWorkerKill] < 3 {
		t.Errorf("only %d worker kills, want the planned kills at failpoints and moments", s.Faults[FaultWorkerKill])
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
	w, err := env.StartWorker(context.Background(), WorkerOptions{})
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

// TestWorkerKilledInFlight: a worker killed while its Begin is in flight
// (held inside SQLite's transaction, holding the file's write lock) leaves
// an unknown outcome in the history, its transaction rolled back and the
// lock free; a worker killed after its claim leaves the claim behind, in
// flight, for another to take over after LockTTL.
func TestWorkerKilledInFlight(t *testing.T) {
	o := sqliteOptions(t, stores.Correct)
	env := testEnv(t, o, "inflight")
	ctx := context.Background()
	w, err := env.StartWorker(ctx, WorkerOptions{
		Announce: []string{faults.BeginBeforeCommit, faults.RunAfterClaim},
		Decide:   func(*Worker, string, stores.KeyRef) WorkerAction { return WorkerAction{Kill: true} },
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
	if len(ops) != 1 || !ops[0].Output.Unknown || ops[0].Return != Never {
		t.Fatalf("ops %+v, want one unknown Begin", ops)
	}
	// The transaction rolled back: the key is free, and the file writable.
	d, err := env.Store.Begin(ctx, stores.Request{KeyRef: env.Order(0, "").Key, Fingerprint: env.Order(0, "").Fingerprint, Now: time.Now()})
	if err != nil || d.Outcome != stores.Claimed || d.Takeover {
		t.Fatalf("after the kill inside Begin: %+v, %v; want a fresh claim", d, err)
	}

	// Killed after the claim: the claim stays (durable), in flight.
	w2, err := env.StartWorker(ctx, WorkerOptions{
		Announce: []string{faults.RunAfterClaim},
		Decide:   func(*Worker, string, stores.KeyRef) WorkerAction { return WorkerAction{Kill: true} },
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
		if f.Kind == FaultWorkerKill {
			kills++
		}
	}
	if kills != 2 {
		t.Errorf("%d worker-kill faults recorded, want 2", kills)
	}
}

// testEnv opens a store for one test the way the runner does for a
// scenario, and closes it when the test ends.
func testEnv(t *testing.T, o Options, scenario string) *Env {
	t.Helper()
	cfg := stores.Config{LockTTL: o.LockTTL, Retention: o.Retention, Variant: o.Variant}
	runID := time.Now().UnixNano() % 1_000_000_000
	st, err := o.Open(context.Background(), scenario, runID, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	env := &Env{Store: st, Config: cfg, Hist: NewHistory(), Ledger: NewLedger(), Clients: o.Clients, Keys: o.Keys,
		Seed: o.Seed, rand: newTestRand(), clock: faults.RealClock{}, opts: o, storeAddr: o.storeAddr(scenario, runID), Tenant: "t0"}
	env.Config.Namespace = fmt.Sprintf("idem_%d_%s", runID, strings.ReplaceAll(scenario, "-", "_")) // as Open named it
	return env
}

// TestWorkersScenarioCatchesRace: the checkers see across processes: two
// worker processes running select-then-insert both claim a key.
func TestWorkersScenarioCatchesRace(t *testing.T) {
	sum, err := Run(context.Background(), sqliteOptions(t, "select-then-insert", "workers"))
	if err != nil {
		t.Fatal(err)
	}
	s := sum.Scenarios[0]
	logScenario(t, s)
	if s.Verdict != Fail {
		t.Fatalf("select-then-insert survived the workers scenario: %s", s.Verdict)
	}
}

// TestWorkersSkip: the memory store, a factory, or no worker command:
// the workers scenario says why it cannot run.
func TestWorkersSkip(t *testing.T) {
	mem, _ := stores.Lookup("memory")
	o := DefaultOptions()
	o.Backend, o.Scenarios, o.WorkerCommand = mem, []string{"workers"}, testWorkerCommand(t)
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if s := sum.Scenarios[0]; s.Verdict != Skipped || !contains(s.Skipped, "one process") {
		t.Errorf("memory: %s %q", s.Verdict, s.Skipped)
	}
	if sum.Verdict != Pass {
		t.Errorf("a skipped scenario made the run %s", sum.Verdict)
	}
	sq, _ := stores.Lookup("sqlite")
	o.Backend, o.WorkerCommand = sq, nil
	if why := WorkersSkip(o); !contains(why, "worker command") {
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
	kill := func(*Worker, string, stores.KeyRef) WorkerAction { return WorkerAction{Kill: true} }
	for i := 0; i < n; i++ {
		w, err := env.StartWorker(ctx, WorkerOptions{Announce: []string{faults.RunAfterClaim}, Decide: kill})
		if err != nil {
			t.Fatal(err)
		}
		w.Submit(env.Order(i, ""))
		<-w.Done()
	}
	w, err := env.StartWorker(ctx, WorkerOptions{Announce: []string{faults.RunAfterComplete}, Decide: func(w *Worker, _ string, k stores.KeyRef) WorkerAction {
		return WorkerAction{Kill: k == env.Order(2*n-1, "").Key}
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
		case isClaim(op):
			claims++
		case accepted(op, models.Complete):
			done++
		}
	}
	b, _ := stores.Lookup("sqlite")
	fresh, err := b.Open(ctx, env.storeAddr, env.Config)
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
