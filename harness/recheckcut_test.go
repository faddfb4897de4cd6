package harness_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestRecheckOfAnInterruptedRun: a scenario an interrupt cut short, whose
// Begins met a live claim and ended in the run's own cancel, is judged
// again as it was when the run ended: under --strict-availability the
// cancelled calls are no failure of the store (undecided), where a
// recheck failed a correct Redis store on them ("2 of 2 Begins … context
// canceled"). The same history, not interrupted, fails, as it should.
func TestRecheckOfAnInterruptedRun(t *testing.T) {
	ms := int64(time.Millisecond)
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	saved := func(scenarioCut, runCut bool) *results.Summary {
		h := history.New()
		h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "f", ID: 1, Now: t0},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "a", DecidedAt: t0}}, Call: 0, Return: 1 * ms})
		for i := 0; i < 4; i++ {
			h.AddOp(history.Op{Client: 2 + i, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "f", ID: 2 + i, Now: t0.Add(2 * time.Millisecond)},
				Output: models.Output{Unknown: true}, Call: 2 * ms, Return: history.Never, ErrAt: 3 * ms, Err: "redis: begin: context canceled"})
		}
		p := check.Params{LockTTL: 250 * time.Millisecond, Retention: time.Minute, ProbeClient: -1, StrictAvailability: true, Clock: stores.CallerClock}
		s := results.ScenarioResult{Name: "takeover", Verdict: check.Pass, Check: &p, Interrupted: scenarioCut}
		s.Attach(h, history.NewLedger())
		return &results.Summary{Interrupted: runCut, Scenarios: []results.ScenarioResult{s}}
	}
	availability := func(sum *results.Summary) check.Verdict {
		for _, c := range sum.Scenarios[0].Checkers {
			if c.Checker == check.Availability {
				return c.Verdict
			}
		}
		t.Fatalf("no availability result: %+v", sum.Scenarios[0].Checkers)
		return ""
	}
	if v := availability(harness.Recheck(context.Background(), saved(false, false))); v != check.Fail {
		t.Fatalf("a run that was not interrupted: availability %s, want fail (the test judges nothing)", v)
	}
	for _, c := range []struct{ scenario, run bool }{{true, true}, {false, true}} { // flagged; saved before scenarios said so
		if v := availability(harness.Recheck(context.Background(), saved(c.scenario, c.run))); v == check.Fail {
			t.Errorf("interrupted (scenario flagged %v): availability failed on the run's own cancel", c.scenario)
		}
	}
}
