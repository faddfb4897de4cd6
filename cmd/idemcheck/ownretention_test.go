package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
)

// TestSummarySaysOwnRetention: the scenarios that kept a retention of
// their own are named beside the run's --retention (a replicated
// failover kept 5 minutes beside --retention 24h, said nowhere); a
// skipped one, one that kept the run's, and a run saved before runs
// said their retention say nothing.
func TestSummarySaysOwnRetention(t *testing.T) {
	d := func(x time.Duration) results.Duration { return results.Duration(x) }
	sum := &results.Summary{Retention: d(24 * time.Hour), Scenarios: []results.ScenarioResult{
		{Name: "race", Verdict: check.Pass, Retention: d(24 * time.Hour)},
		{Name: "failover", Verdict: check.Pass, Retention: d(5 * time.Minute)},
		{Name: "partition", Verdict: check.Pass, Retention: d(5 * time.Minute)},
		{Name: "retention", Verdict: check.Skipped, Retention: d(time.Second)},
	}}
	var b bytes.Buffer
	sayOwnRetention(&b, sum)
	if got := strings.TrimSpace(b.String()); got != "retention 5m0s, not --retention 24h0m0s, in the scenarios that keep their own: failover, partition" {
		t.Errorf("got %q", got)
	}
	b.Reset()
	sum.Retention = 0
	sayOwnRetention(&b, sum)
	if b.Len() != 0 {
		t.Errorf("a run saved before runs said their retention: %q", b.String())
	}
}
