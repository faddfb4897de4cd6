package scenario

import (
	"context"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// wholeSecondBegins reads each Begin's Now to the second, as a store
// keeping its lock times as unix seconds does; its inner store's LockTTL
// is the run's rounded up to a second and a second more, so it holds a
// claim from its LockTTL up to 2 s: correct, with its ClockStep declared.
type wholeSecondBegins struct{ stores.Store }

func (s wholeSecondBegins) Begin(ctx context.Context, r stores.Request) (stores.Decision, error) {
	r.Now = r.Now.Truncate(time.Second)
	return s.Store.Begin(ctx, r)
}

// TestProbeWaitsOutTheClockStep: on a manual clock that starts on a whole
// second, a claim the store holds rightly for 2 s (a LockTTL of 250 ms,
// its clock counting in whole seconds, declared) is over when the final
// probe asks. The probe jumped three LockTTLs, 750 ms: it met the claim,
// and liveness failed a correct store in a third of idemtest's
// sched-crash runs (the start's fraction of a second decided which).
func TestProbeWaitsOutTheClockStep(t *testing.T) {
	cfg := stores.Config{LockTTL: 250 * time.Millisecond, Retention: time.Minute}
	inner := cfg
	inner.LockTTL = 2 * time.Second
	mem, err := memory.New(inner)
	if err != nil {
		t.Fatal(err)
	}
	st := wholeSecondBegins{mem}
	env := NewEnv(Setup{Name: "sched-crash", Store: st, Config: cfg, Clients: 1, Keys: 1, Seed: 1, RandSeed: 1,
		Caps: Caps{Semantics: stores.Semantics{ClockStep: time.Second}}})
	env.clock = faults.NewManualClock(time.Date(2026, 12, 8, 3, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := env.Order(0, "").Key
	rec := env.Recorder(env.NewClientID(), st, env.clock)
	if d, err := rec.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "amount=1", Now: env.clock.Now()}); err != nil || d.Outcome != stores.Claimed {
		t.Fatalf("claim: %v %v", d.Outcome, err)
	}
	// The owner crashed: its claim is left held.
	probeID := env.NewClientID()
	env.ProbeAfterLockTTL(ctx, probeID)
	var last stores.Outcome
	for _, op := range env.Hist.Ops() {
		if op.Client == probeID && op.Input.Kind == models.Begin && op.Output.Decided() {
			last = op.Output.Decision.Outcome
		}
	}
	if last != stores.Claimed {
		t.Errorf("the final probe's last answer: %v, want the claim taken over (its lease and clock step were over)", last)
	}
}
