package main

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/hunt"
)

// TestSurvivorsNameTheBudget: a mutant whose hunt gave up at --budget is
// said to be not caught within it, with its episodes and how long it
// ran, and its seconds column is empty: at --budget 1s, stale-overwrite
// printed SURVIVED 0.000 and the run FAIL, nothing naming the budget.
func TestSurvivorsNameTheBudget(t *testing.T) {
	rep := &hunt.MutantsReport{Store: "postgres", Seed: 7, Seeds: 1, Budget: 1, Correct: hunt.CorrectReport{Verdict: check.Pass},
		Mutants: []hunt.MutantReport{
			{Name: "stale-overwrite", Side: "store", Scenario: "sched-takeover", Seeds: 1, Runs: []hunt.Kill{{Scenario: "sched-takeover", Episodes: 5, Hunted: 3.13}}},
			{Name: "takeover-ignores-fingerprint", Side: "store", Scenario: "sched-mismatch", Killed: true, Kills: 1, Seeds: 1, Seconds: 0.25, Checker: "mismatch",
				Runs: []hunt.Kill{{Scenario: "sched-mismatch", Killed: true, Episodes: 2, Seconds: 0.25, Hunted: 0.25}}},
		}}
	var b strings.Builder
	printMutants(&b, rep)
	out := b.String()
	for _, want := range []string{"its budget (--budget 1s) was spent", "stale-overwrite (sched-takeover): 5 episode(s) over 3.1s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0.000") {
		t.Errorf("a survivor's seconds printed as a time:\n%s", out)
	}
	if strings.Contains(out, "takeover-ignores-fingerprint (") {
		t.Errorf("a killed mutant listed as not caught:\n%s", out)
	}
	// The columns line up past the longest name.
	var starts []int
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  stale-overwrite  ") || strings.HasPrefix(l, "  takeover-ignores-fingerprint store") {
			starts = append(starts, strings.Index(l, "store"))
		}
	}
	if len(starts) != 2 || starts[0] != starts[1] {
		t.Errorf("the side column starts at %v:\n%s", starts, out)
	}
}
