package harness_test

import (
	"path/filepath"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
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
func TestRecheckSavedRuns(t *testing.T) {
	for name, want := range map[string]check.Verdict{
		"correct": check.Pass, "select-then-insert": check.Fail, "unfenced-complete": check.Fail, "key-per-try": check.Fail,
	} {
		t.Run(name, func(t *testing.T) {
			saved, err := harness.LoadRun(filepath.Join("testdata", "runs", name))
			if err != nil {
				t.Fatal(err)
			}
			got := harness.Recheck(saved)
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
