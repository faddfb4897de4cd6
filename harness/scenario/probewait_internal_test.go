package scenario

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// lostSaves acknowledges every save and applies none.
type lostSaves struct{ stores.Store }

func (lostSaves) Complete(context.Context, stores.KeyRef, stores.Token, stores.Response) error {
	return nil
}

// TestProbeWaitLeavesHeldKeysOut: at a LockTTL of minutes that the run
// may not wait out (Setup.ProbeWait), the final probe asks at once about
// every key whose claims all ended, a stuck one among them (its save was
// accepted and lost), and leaves out the key a claim still holds, saying
// so: asked at once it answers 409, which is no stuck key. Before, the
// probe waited the ten minutes out, and idemtest skipped such scenarios.
func TestProbeWaitLeavesHeldKeysOut(t *testing.T) {
	cfg := stores.Config{LockTTL: 10 * time.Minute, Retention: time.Hour}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := NewEnv(Setup{Name: "race", Store: mem, Config: cfg, Clients: 1, Keys: 3, Seed: 1, RandSeed: 1, ProbeWait: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, done, stuck := env.Order(0, "").Key, env.Order(1, "").Key, env.Order(2, "").Key
	rec := env.Recorder(env.NewClientID(), mem, env.clock)
	lossy := env.Recorder(env.NewClientID(), lostSaves{mem}, env.clock)
	claim := func(r *history.Recorder, k stores.KeyRef) stores.Token {
		d, err := r.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "amount=1", Now: env.clock.Now()})
		if err != nil || d.Outcome != stores.Claimed {
			t.Fatalf("claim %s: %v %v", k, d.Outcome, err)
		}
		return d.Token
	}
	claim(rec, held)
	if err := rec.Complete(ctx, done, claim(rec, done), stores.Response{Status: 201, Body: "ok"}); err != nil {
		t.Fatal(err)
	}
	if err := lossy.Complete(ctx, stuck, claim(lossy, stuck), stores.Response{Status: 201, Body: "ok"}); err != nil {
		t.Fatal(err)
	}

	env.PlanProbe()
	if got := env.Unprobed(); !slices.Equal(got, []stores.KeyRef{held}) {
		t.Fatalf("left out %v, want the held key %v alone", got, held)
	}
	if notes := strings.Join(env.schedule, "\n"); !strings.Contains(notes, "final probe: 1 key(s) left out") {
		t.Errorf("no note of the key left out: %q", notes)
	}
	probeID := env.NewClientID()
	env.ProbeAfterLockTTL(ctx, probeID)
	answers := map[stores.KeyRef]stores.Outcome{}
	for _, op := range env.Hist.Ops() {
		if op.Client == probeID && op.Input.Kind == models.Begin && op.Output.Decided() {
			answers[op.Input.Key] = op.Output.Decision.Outcome
		}
	}
	if _, ok := answers[held]; ok {
		t.Errorf("the held key was probed")
	}
	if answers[done] != stores.Replay {
		t.Errorf("the completed key's probe: %v, want a replay (was it probed at once?)", answers[done])
	}
	if answers[stuck] != stores.InFlight {
		t.Errorf("the stuck key's probe: %v, want in flight, which liveness fails", answers[stuck])
	}
}

// refusingBegins refuses its first n Begins as not applied, then answers.
type refusingBegins struct {
	stores.Store
	n int
}

func (r *refusingBegins) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if r.n > 0 {
		r.n--
		return stores.Decision{}, stores.ErrNotApplied
	}
	return r.Store.Begin(ctx, req)
}

// TestProbeAsksAgainAfterRefusals: a final probe the store refuses as
// not applied (it changed nothing) asks again, past the eight tries an
// error gets, until the store answers: a correct store refusing one call
// in two left one key in 256 unjudged, and idemtest red.
func TestProbeAsksAgainAfterRefusals(t *testing.T) {
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Hour}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := &refusingBegins{Store: mem}
	env := NewEnv(Setup{Name: "race", Store: st, Config: cfg, Clients: 1, Keys: 1, Seed: 1, RandSeed: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := env.Order(0, "").Key
	rec := env.Recorder(env.NewClientID(), mem, env.clock)
	d, err := rec.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "amount=1", Now: env.clock.Now()})
	if err != nil || rec.Complete(ctx, k, d.Token, stores.Response{Status: 201, Body: "ok"}) != nil {
		t.Fatalf("claim and save: %v", err)
	}
	st.n = 12 // more than probeErrTries
	probeID := env.NewClientID()
	env.Probe(ctx, probeID)
	var last history.Op
	for _, op := range env.Hist.Ops() {
		if op.Client == probeID && op.Input.Kind == models.Begin {
			last = op
		}
	}
	if !last.Output.Decided() || last.Output.Decision.Outcome != stores.Replay {
		t.Fatalf("the probe's last answer: %+v (%s), want a replay after the refusals", last.Output, last.Err)
	}
}
