package harness_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
)

// TestMain lets this test binary serve as a worker process.
func TestMain(m *testing.M) { harnesstest.Main(m) }

func memoryOptions(t *testing.T, variant string, scenarios ...string) harness.Options {
	t.Helper()
	return harnesstest.Options(t, "memory", variant, scenarios...)
}

func TestMemoryCorrectPassesAll(t *testing.T) {
	requirePass(t, memoryOptions(t, stores.Correct), "the correct memory store")
}

func TestMemoryMutantsCaught(t *testing.T) {
	for _, m := range []string{"select-then-insert", "unfenced-complete", "unfenced-release", "no-fingerprint", "no-takeover", "short-retention", "blind-takeover"} {
		t.Run(m, func(t *testing.T) {
			row, _ := stores.LookupMutant(m)
			sc := row.Scenario
			sum, err := harness.Run(context.Background(), memoryOptions(t, m, sc))
			if err != nil {
				t.Fatal(err)
			}
			if sum.Verdict != check.Fail {
				t.Fatalf("mutant %s survived scenario %s", m, sc)
			}
			v := sum.Violations[0]
			t.Logf("killed by %s on %s: %s", v.Checker, v.Key, v.Detail)
		})
	}
}

// TestRepeatedScenariosKeepTheirOwnKeys: a scenario listed twice, and a
// run repeated with Count, runs each time on its own store, so the second
// run never meets the first one's keys (it used to, and the correct store
// failed replay-fidelity).
func TestRepeatedScenariosKeepTheirOwnKeys(t *testing.T) {
	o := harnesstest.Options(t, "sqlite", stores.Correct, "race", "race")
	o.Count = 2
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Scenarios) != 4 {
		t.Fatalf("%d scenario runs, want 4", len(sum.Scenarios))
	}
	for i, s := range sum.Scenarios {
		if s.Verdict != check.Pass || s.Repetition != i {
			t.Errorf("run %d: %s repetition %d: %s %v", i, s.Name, s.Repetition, s.Verdict, s.Violations)
		}
	}
}

// TestScenarioSeedIgnoresItsPlace: a scenario draws the same workload from
// the seed whether it runs alone or among others.
func TestScenarioSeedIgnoresItsPlace(t *testing.T) {
	if harness.ScenarioSeed(1, "race", 0) == harness.ScenarioSeed(1, "race", 1) ||
		harness.ScenarioSeed(1, "race", 0) == harness.ScenarioSeed(2, "race", 0) ||
		harness.ScenarioSeed(1, "race", 0) == harness.ScenarioSeed(1, "crash", 0) {
		t.Error("seeds collide across repetitions, seeds or scenarios")
	}
}

// TestParallelRunKeepsPlanOrder: scenarios that run at once (Parallel)
// still report in the plan's order, each with its own repetition, and they
// did overlap (the progress stream shows two or more running at once).
func TestParallelRunKeepsPlanOrder(t *testing.T) {
	plan := []string{"retention", "race", "crash", "sched-race", "mismatch", "race"}
	o := memoryOptions(t, stores.Correct, plan...)
	o.Parallel = 4
	var mu sync.Mutex
	running, most := map[string]bool{}, 0
	o.Progress = func(p harness.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Done {
			delete(running, p.Scenario)
		} else {
			running[p.Scenario] = true
		}
		most = max(most, len(running))
	}
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != check.Pass {
		t.Fatalf("verdict %s: %v", sum.Verdict, sum.Violations)
	}
	if len(sum.Scenarios) != len(plan) {
		t.Fatalf("%d results, want %d", len(sum.Scenarios), len(plan))
	}
	for i, s := range sum.Scenarios {
		if s.Name != plan[i] {
			t.Errorf("result %d is %s, want %s (the plan's order)", i, s.Name, plan[i])
		}
	}
	if r := sum.Scenarios[5].Repetition; r != 1 {
		t.Errorf("the second race has repetition %d, want 1", r)
	}
	if most < 2 {
		t.Errorf("at most %d scenario ran at once with Parallel 4", most)
	}
}

// TestInterruptedParallelRunSaysWhatDidNotRun: a run interrupted while
// scenarios run at once lists every scenario that never started, in the
// plan's order, and reports each started one.
func TestInterruptedParallelRunSaysWhatDidNotRun(t *testing.T) {
	plan := []string{"retention", "race", "crash", "mismatch", "error", "abuse"}
	o := memoryOptions(t, stores.Correct, plan...)
	o.Parallel = 2
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	o.Progress = func(p harness.Progress) {
		if p.Done {
			once.Do(cancel) // the first scenario to finish ends the run
		}
	}
	sum, err := harness.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Interrupted || sum.Verdict == check.Pass {
		t.Errorf("interrupted %v, verdict %s", sum.Interrupted, sum.Verdict)
	}
	if len(sum.Scenarios)+len(sum.NotRun) != len(plan) || len(sum.NotRun) == 0 {
		t.Fatalf("%d results and %d not run (%v), want %d in all with some not run", len(sum.Scenarios), len(sum.NotRun), sum.NotRun, len(plan))
	}
	pos := map[string]int{}
	for i, n := range plan {
		pos[n] = i
	}
	for i := 1; i < len(sum.NotRun); i++ {
		if pos[sum.NotRun[i]] < pos[sum.NotRun[i-1]] {
			t.Errorf("not run %v: out of the plan's order", sum.NotRun)
		}
	}
}

// TestForecastCountsCalls: a run's forecast counts its calls at the
// backend's measured wall time per call, not its LockTTLs alone: a drawn
// SQLite run of takeover, crash and abuse with 5,364 keys at a 50 ms
// LockTTL, forecast at under 10 s by LockTTLs, ran for 1,122 s.
func TestForecastCountsCalls(t *testing.T) {
	b, err := stores.Lookup("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	o := harness.DefaultOptions()
	o.Backend, o.Parallel = b, 4
	o.Scenarios = []string{"takeover", "crash", "abuse"}
	o.LockTTL, o.Keys, o.Clients = 50*time.Millisecond, 5364, 8
	if est := o.Estimate(); est < 10*time.Minute {
		t.Errorf("forecast %v for 5,364 keys of takeover, crash and abuse on sqlite: want the measured order (1,122 s)", est)
	}
	o.Keys = 8
	if est := o.Estimate(); est > 10*time.Second {
		t.Errorf("forecast %v for 8 keys: want seconds", est)
	}
}

// TestNotRunNamesRepetitions: the scenario runs a cut run never started
// are named as their results are, each repetition apart ("race.2"), not
// "race" three times.
func TestNotRunNamesRepetitions(t *testing.T) {
	o := memoryOptions(t, stores.Correct, "race", "crash")
	o.Count = 2
	sum := o.Unstarted(time.Now())
	if got := strings.Join(sum.NotRun, ","); got != "race,crash,race.2,crash.2" {
		t.Fatalf("not run: %s", got)
	}
}
