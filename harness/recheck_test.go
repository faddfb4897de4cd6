package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/stores"
)

// TestRecheckSavedRuns re-checks saved runs (testdata/runs/<name>: a
// summary.json and history.jsonl as `idemcheck check` wrote them) with the
// current checkers: every checker must reach the verdict it reached when
// the run was made. They are regression seeds: a correct store's run that
// must keep passing, and three mutants' runs that must keep failing.
//
//	correct             memory, race and crash, 2 keys
//	select-then-insert  sqlite, sched-race, 2 keys
//	unfenced-complete   memory, takeover, 2 keys
//	key-per-try         memory (client-side mutant), retry-after-charge, 2 keys
//	lost-answer-at-lockttl
//	                    the JavaScript example store (exec) behind
//	                    scripts/lossy-exec.py (LOSS=0.1 LOSS_SEED=1), which
//	                    turns one answer in ten into an unknown outcome
//	                    after the store acted, sched-crash, seed 1: a claim
//	                    whose answer was lost, taken over at exactly
//	                    LockTTL by the store's microsecond clock; it failed
//	                    linearizability until the model placed an
//	                    unanswered claim at the store's grain
//	                    (models.RequestClockGrain)
func TestRecheckSavedRuns(t *testing.T) {
	for name, want := range map[string]check.Verdict{
		"correct": check.Pass, "select-then-insert": check.Fail, "unfenced-complete": check.Fail, "key-per-try": check.Fail,
		"lost-answer-at-lockttl": check.Pass,
	} {
		t.Run(name, func(t *testing.T) {
			saved, err := harness.LoadRun(filepath.Join("testdata", "runs", name))
			if err != nil {
				t.Fatal(err)
			}
			got := harness.Recheck(context.Background(), saved)
			if got.Verdict != want || saved.Verdict != want {
				t.Errorf("verdict %s when saved, %s now; want %s", saved.Verdict, got.Verdict, want)
			}
			for i, s := range got.Scenarios {
				if s.History() == nil || s.History().OpCount() == 0 {
					t.Errorf("%s: no history loaded", s.Name)
				}
				then := map[string]check.Result{}
				for _, c := range saved.Scenarios[i].Checkers {
					then[c.Checker] = c
				}
				for _, c := range s.Checkers {
					old, ok := then[c.Checker]
					switch {
					case !ok && c.Verdict == check.Fail && want == check.Pass:
						t.Errorf("%s/%s, a checker added since, fails a run saved as passing: %s", s.Name, c.Checker, c.Detail)
					case ok && (c.Verdict != old.Verdict || len(c.Violations) != len(old.Violations)):
						t.Errorf("%s/%s: %s with %d violations now, %s with %d when saved", s.Name, c.Checker, c.Verdict, len(c.Violations), old.Verdict, len(old.Violations))
					}
				}
			}
		})
	}
}

// TestRecheckRepetitions runs two repetitions of two scenarios (--count 2)
// on a correct SQLite store, writes the run as `idemcheck check` does, and
// re-checks it: each repetition must keep its own history and files
// (named by results.ID), so the re-check passes as the run did, each
// checker with the same detail. Before results had an identity,
// history.jsonl merged the repetitions and the re-check failed with
// dozens of violations.
func TestRecheckRepetitions(t *testing.T) {
	o := harness.DefaultOptions()
	b, err := stores.Lookup("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	o.Backend, o.Addr, o.Keys, o.Count = b, t.TempDir(), 3, 2
	o.Scenarios = []string{"race", "sched-race"}
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != check.Pass || len(sum.Scenarios) != 4 {
		t.Fatalf("the run: %s with %d scenario runs, want pass with 4", sum.Verdict, len(sum.Scenarios))
	}
	dir, err := report.PrepareRunDir(t.TempDir(), "sqlite", "correct", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.Write(sum); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"linearizability-race.html", "linearizability-race.2.html", "linearizability-sched-race.2.html"} {
		if _, err := os.Stat(filepath.Join(dir.Path, f)); err != nil {
			t.Errorf("the second repetition has no file of its own: %v", err)
		}
	}
	saved, err := harness.LoadRun(dir.Path)
	if err != nil {
		t.Fatal(err)
	}
	got := harness.Recheck(context.Background(), saved)
	for i, s := range got.Scenarios {
		if s.History() == nil || s.History().OpCount() != sum.Scenarios[i].Ops {
			t.Errorf("%s: the re-check read another history than the run's (%d calls run)", s.ID(), sum.Scenarios[i].Ops)
		}
		if s.Verdict != check.Pass {
			t.Errorf("%s: re-checked as %s with %d violations", s.ID(), s.Verdict, len(s.Violations))
		}
		// The re-check judges what the run judged: every checker says
		// what it said then. A run judged its history in memory, where
		// times carried Go's monotonic reading, and the re-check its
		// saved copy without it (faults.Wall).
		ran := sum.Scenarios[i].Checkers
		if len(s.Checkers) != len(ran) {
			t.Errorf("%s: %d checkers re-checked, %d when run", s.ID(), len(s.Checkers), len(ran))
			continue
		}
		for j, c := range s.Checkers {
			if c.Checker != ran[j].Checker || c.Verdict != ran[j].Verdict || c.Detail != ran[j].Detail {
				t.Errorf("%s: re-checked %s %s (%s); run %s %s (%s)", s.ID(), c.Checker, c.Verdict, c.Detail, ran[j].Checker, ran[j].Verdict, ran[j].Detail)
			}
		}
	}
}

// TestRecheckMissingHistory: a run whose history.jsonl lost a scenario
// run that recorded calls cannot be re-checked (an error), never passed on
// nothing.
func TestRecheckMissingHistory(t *testing.T) {
	src := filepath.Join("testdata", "runs", "correct")
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(src, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.LoadRun(dir); err == nil || !strings.Contains(err.Error(), "no history of") {
		t.Errorf("an empty history.jsonl loaded without error (%v)", err)
	}
}

// TestLoadRunSpilledLeavesNothing: a saved run loaded to spill as it
// loads (LoadRunSpilled, what recheck and replay do) rechecks as LoadRun's
// does, and its done leaves the run's folder as it was (a run small
// enough spills nothing; history.TestSpillKeepsEveryRecord loads one that
// does).
func TestLoadRunSpilledLeavesNothing(t *testing.T) {
	dir := filepath.Join("testdata", "runs", "select-then-insert")
	saved, done, err := harness.LoadRunSpilled(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	got := harness.Recheck(context.Background(), saved)
	done()
	if got.Verdict != check.Fail {
		t.Errorf("verdict %s, want %s", got.Verdict, check.Fail)
	}
	if _, err := os.Stat(filepath.Join(dir, harness.SpillDir)); !os.IsNotExist(err) {
		t.Errorf("LoadRunSpilled left %s: %v", harness.SpillDir, err)
	}
}
