package harness_test

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestLeaseSaid: claims that report one lease of their own (15 min
// under a 250 ms LockTTL) say it; claims whose reported leases change
// from claim to claim (a DecidedAt read by a SELECT before the INSERT
// that starts the lease: 33, 39 and 86 ms) say no lease, but their
// spread (a hint told the user to declare 86.446 ms).
func TestLeaseSaid(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	run := func(leases ...time.Duration) (time.Duration, bool, [2]time.Duration) {
		h := history.New()
		for i, l := range leases {
			at := t0.Add(time.Duration(i) * time.Second)
			h.AddOp(history.Op{Client: i, Call: int64(i), Return: int64(i) + 1,
				Input:  models.Input{Kind: models.Begin, Key: stores.KeyRef{Key: "k"}, Fingerprint: "fp", Now: at},
				Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: stores.Token("t" + string(rune('a'+i))), DecidedAt: at, LeaseUntil: at.Add(l)}}})
		}
		r := &results.ScenarioResult{LockTTL: results.Duration(250 * time.Millisecond)}
		r.Attach(h, nil)
		return harness.LeaseSaid(r)
	}
	if said, ok, _ := run(15*time.Minute, 15*time.Minute); !ok || said != 15*time.Minute {
		t.Errorf("one lease of the store's own: said %v, %v; want 15m0s", said, ok)
	}
	if _, ok, _ := run(250*time.Millisecond, 260*time.Millisecond); ok {
		t.Error("the run's own lease said again: want none")
	}
	said, ok, spread := run(33*time.Millisecond, 39*time.Millisecond, 86*time.Millisecond)
	if ok || said != 0 || spread != [2]time.Duration{33 * time.Millisecond, 86 * time.Millisecond} {
		t.Errorf("leases that change from claim to claim: said %v, %v, spread %v; want no lease, spread 33ms to 86ms", said, ok, spread)
	}
}
