package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
)

// LoadRun reads a results directory: its summary.json and, from its
// history.jsonl, each scenario's history and ledger, attached to the
// scenario's result (History and Ledger return them).
func LoadRun(dir string) (*Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return nil, err
	}
	var sum Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, "summary.json"), err)
	}
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	saved, err := history.Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, "history.jsonl"), err)
	}
	byName := map[string]history.Saved{}
	for _, s := range saved {
		byName[s.Scenario] = s
	}
	for i := range sum.Scenarios {
		if s, ok := byName[sum.Scenarios[i].Name]; ok {
			sum.Scenarios[i].hist, sum.Scenarios[i].ledger = s.Hist, s.Ledger
		}
	}
	return &sum, nil
}

// Recheck judges a loaded run's histories again with the current
// checkers, by the params each scenario was judged by, and returns the
// new summary (the saved one is left as it was). A scenario that was
// skipped, or has no history or params, keeps its saved result.
func Recheck(saved *Summary) *Summary {
	sum := *saved
	sum.Scenarios = make([]ScenarioResult, len(saved.Scenarios))
	sum.Violations = []check.Violation{}
	for i, s := range saved.Scenarios {
		if s.hist != nil && s.Check != nil && s.Verdict != check.Skipped {
			s.judge(false)
			if s.Error != "" && s.Verdict == check.Pass {
				s.Verdict = check.Unknown // the workload did not finish, as when it ran
			}
		}
		sum.Scenarios[i] = s
		sum.Violations = append(sum.Violations, s.Violations...)
	}
	sum.Verdict = overall(sum.Scenarios)
	return &sum
}
