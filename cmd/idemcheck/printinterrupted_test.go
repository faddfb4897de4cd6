package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
)

// TestInterruptedNamesARunItsJournalCut: a scenario whose journal stopped
// before its end (a disk that filled while it ran) is judged on what it
// recorded, and may fail so; it was listed as finished, beside "cut
// short: none", though its end was never recorded. A scenario that could
// not be set up was listed as cut short; it is said apart.
func TestInterruptedNamesARunItsJournalCut(t *testing.T) {
	sum := &results.Summary{Interrupted: true, Scenarios: []results.ScenarioResult{
		{Name: "race", Verdict: check.Fail, Cut: &results.Cut{}},
		{Name: "error", Verdict: check.Pass},
		{Name: "chaos", Verdict: check.Unknown},
		{Name: "store-faults", Verdict: check.Unknown, Error: harness.SetupFailed + "open sqlite store: database or disk is full"},
	}, NotRun: []string{"crash"}}
	var b bytes.Buffer
	printInterrupted(&b, sum)
	want := "INTERRUPTED: 1 scenario run(s) finished (error); cut short: race (judged on what its journal recorded: fail), chaos; 1 never ran (crash); could not be set up: store-faults\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
