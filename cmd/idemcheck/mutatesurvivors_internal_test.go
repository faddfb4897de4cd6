package main

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/mutate"
)

// TestMutateSurvivorsSayTheirBudgetsAndSkips: the survivors' heading
// names the budgets each mutant was given and the scenarios skipped on
// the store: a survivor at --quick 300ms, or of a weakened setting whose
// server-killing scenario cannot run on SQLite, read as a plain miss.
func TestMutateSurvivorsSayTheirBudgetsAndSkips(t *testing.T) {
	rep := &mutate.Report{Quick: 0.3, Budget: 6, Baseline: []mutate.BaselineRun{
		{Scenario: "race", Passed: true},
		{Scenario: "store-faults", Passed: true, Skipped: "the sqlite store is embedded"},
	}}
	got := survivorsTitle(rep)
	for _, want := range []string{"--quick 300ms then --budget 6s per scenario", "run against none: store-faults (the sqlite store is embedded)"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "race (") {
		t.Errorf("a scenario that ran is named skipped: %q", got)
	}
}
