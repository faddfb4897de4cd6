package models

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

var (
	t0   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg  = Config{LockTTL: 100 * time.Millisecond, Retention: 10 * time.Second}
	resp = stores.Response{Status: 201, Body: "charged"}
)

func inFlight(at time.Time, tok stores.Token) State {
	return State{Exists: true, Fingerprint: "fp", LockedAt: at, CreatedAt: at, Token: tok, Used: string(tok)}
}

// TestDecisionTable is the lesson card's decision table, row by row ("The
// decision, in order"), as Decide answers it.
func TestDecisionTable(t *testing.T) {
	done := inFlight(t0, "t1")
	done.Done, done.Response = true, resp
	for _, tc := range []struct {
		row   string
		state State
		fp    string
		now   time.Time
		want  Expected
	}{
		{"no row: the INSERT wins, run the work", State{}, "fp", t0, Expected{Outcome: stores.Claimed}},
		{"no row, though keys were used before (released): a fresh claim", State{Used: "t1"}, "fp", t0, Expected{Outcome: stores.Claimed}},
		{"row exists, fingerprint differs: 422", inFlight(t0, "t1"), "other", t0, Expected{Outcome: stores.Mismatch}},
		{"done, fingerprint differs: 422, never replayed", done, "other", t0.Add(time.Hour), Expected{Outcome: stores.Mismatch}},
		{"done, same params: replay the saved response", done, "fp", t0.Add(time.Second), Expected{Outcome: stores.Replay, Response: resp}},
		{"in flight, lock younger than LockTTL: 409", inFlight(t0, "t1"), "fp", t0.Add(99 * time.Millisecond), Expected{Outcome: stores.InFlight}},
		{"in flight, lock stale: take over", inFlight(t0, "t1"), "fp", t0.Add(100 * time.Millisecond), Expected{Outcome: stores.Claimed, Takeover: true}},
		{"in flight, long stale: take over", inFlight(t0, "t1"), "fp", t0.Add(time.Hour), Expected{Outcome: stores.Claimed, Takeover: true}},
	} {
		t.Run(tc.row, func(t *testing.T) {
			if got := Decide(cfg, tc.state, tc.fp, tc.now); got != tc.want {
				t.Errorf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDecideSlackAndUncertainty: within Slack of the LockTTL boundary, or
// for a claim whose lock time is only a lower bound, both 409 and a
// takeover are allowed.
func TestDecideSlackAndUncertainty(t *testing.T) {
	slack := Config{LockTTL: 100 * time.Millisecond, Retention: time.Second, Slack: 5 * time.Millisecond}
	if got := Decide(slack, inFlight(t0, "t1"), "fp", t0.Add(96*time.Millisecond)); got.Outcome != stores.Claimed || !got.Ambiguous {
		t.Errorf("4 ms before the boundary with 5 ms slack: %+v, want an ambiguous takeover", got)
	}
	if got := Decide(slack, inFlight(t0, "t1"), "fp", t0.Add(94*time.Millisecond)); got.Outcome != stores.InFlight {
		t.Errorf("6 ms before the boundary: %+v, want 409", got)
	}
	unsure := inFlight(t0, "?7")
	unsure.LockUncertain = true
	if got := Decide(cfg, unsure, "fp", t0.Add(time.Hour)); !got.Ambiguous {
		t.Errorf("an unanswered claim's lock time is a lower bound: %+v, want ambiguous", got)
	}
}

func begin(fp string, at time.Time) Input {
	return Input{Kind: Begin, Key: key, Fingerprint: fp, Now: at}
}

var key = stores.KeyRef{Tenant: "t", Key: "k"}

func claimed(tok stores.Token, at time.Time, takeover bool) Output {
	return Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: tok, Takeover: takeover, DecidedAt: at}}
}

// TestStep: each answer Step allows or forbids, with the card's fencing
// table (a write lands only under the current token) and the rule that
// tokens never repeat for a key.
func TestStep(t *testing.T) {
	claim := inFlight(t0, "t1")
	doneState := claim
	doneState.Done, doneState.Response = true, resp
	for _, tc := range []struct {
		name  string
		state State
		in    Input
		out   Output
		ok    bool
	}{
		{"claim a new key", State{}, begin("fp", t0), claimed("t1", t0, false), true},
		{"claim a new key as a takeover: wrong", State{}, begin("fp", t0), claimed("t1", t0, true), false},
		{"claim with an empty token: wrong", State{}, begin("fp", t0), claimed("", t0, false), false},
		{"claim a released key with a token used before: wrong", State{Used: "t1"}, begin("fp", t0), claimed("t1", t0, false), false},
		{"claim a held key: two owners", claim, begin("fp", t0.Add(time.Millisecond)), claimed("t2", t0.Add(time.Millisecond), false), false},
		{"take over a stale claim", claim, begin("fp", t0.Add(time.Second)), claimed("t2", t0.Add(time.Second), true), true},
		{"take over reusing the token: wrong", claim, begin("fp", t0.Add(time.Second)), claimed("t1", t0.Add(time.Second), true), false},
		{"409 on a live claim", claim, begin("fp", t0.Add(time.Millisecond)), Output{Decision: stores.Decision{Outcome: stores.InFlight, DecidedAt: t0.Add(time.Millisecond)}}, true},
		{"409 on a stale claim: wrong", claim, begin("fp", t0.Add(time.Second)), Output{Decision: stores.Decision{Outcome: stores.InFlight, DecidedAt: t0.Add(time.Second)}}, false},
		{"replay the saved answer", doneState, begin("fp", t0.Add(time.Second)), Output{Decision: stores.Decision{Outcome: stores.Replay, Response: resp, DecidedAt: t0.Add(time.Second)}}, true},
		{"replay another answer: wrong", doneState, begin("fp", t0.Add(time.Second)), Output{Decision: stores.Decision{Outcome: stores.Replay, Response: stores.Response{Status: 201, Body: "other"}, DecidedAt: t0.Add(time.Second)}}, false},
		{"replay to other parameters: wrong", doneState, begin("other", t0.Add(time.Second)), Output{Decision: stores.Decision{Outcome: stores.Replay, Response: resp, DecidedAt: t0.Add(time.Second)}}, false},
		{"422 to other parameters", doneState, begin("other", t0.Add(time.Second)), Output{Decision: stores.Decision{Outcome: stores.Mismatch, DecidedAt: t0.Add(time.Second)}}, true},
		{"422 to the same parameters: wrong", doneState, begin("fp", t0.Add(time.Second)), Output{Decision: stores.Decision{Outcome: stores.Mismatch, DecidedAt: t0.Add(time.Second)}}, false},
		{"save under the current token", claim, Input{Kind: Complete, Key: key, Token: "t1", Response: resp, Now: t0}, Output{}, true},
		{"save under the current token, fenced: wrong", claim, Input{Kind: Complete, Key: key, Token: "t1", Response: resp, Now: t0}, Output{Fenced: true}, false},
		{"save under a stale token, fenced", claim, Input{Kind: Complete, Key: key, Token: "t0", Response: resp, Now: t0}, Output{Fenced: true}, true},
		{"save under a stale token, accepted: wrong", claim, Input{Kind: Complete, Key: key, Token: "t0", Response: resp, Now: t0}, Output{}, false},
		{"save twice (the key is done), accepted: wrong", doneState, Input{Kind: Complete, Key: key, Token: "t1", Response: resp, Now: t0}, Output{}, false},
		{"release under the current token", claim, Input{Kind: Release, Key: key, Token: "t1", Now: t0}, Output{}, true},
		{"release a done key, accepted: wrong", doneState, Input{Kind: Release, Key: key, Token: "t1", Now: t0}, Output{}, false},
		{"a save whose answer was lost may or may not have landed", claim, Input{Kind: Complete, Key: key, Token: "t1", Response: resp, Now: t0}, Output{Unknown: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := Step(cfg, tc.state, tc.in, tc.out)
			if ok := len(next) > 0; ok != tc.ok {
				t.Errorf("Step allowed=%v (next %v), want %v", ok, next, tc.ok)
			}
		})
	}
}

// TestStepNotApplied: a call the store declared not applied
// (stores.ErrNotApplied) changes nothing, whatever its kind and the
// state: exactly one next state, the same.
func TestStepNotApplied(t *testing.T) {
	claim := inFlight(t0, "t1")
	for _, tc := range []struct {
		name  string
		state State
		in    Input
	}{
		{"a Begin on no row did not claim", State{}, begin("fp", t0)},
		{"a Begin on a stale claim did not take it over", claim, begin("fp", t0.Add(time.Second))},
		{"the owner's save did not land", claim, Input{Kind: Complete, Key: key, Token: "t1", Response: resp, Now: t0}},
		{"the owner's release did not land", claim, Input{Kind: Release, Key: key, Token: "t1", Now: t0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := Step(cfg, tc.state, tc.in, Output{NotApplied: true})
			if len(next) != 1 || !Equal(next[0], tc.state) {
				t.Errorf("Step gave %+v, want only %+v", next, tc.state)
			}
		})
	}
}

// TestStepUnknownAndRetention: an unanswered Begin may have claimed (with
// a token nobody saw) or not; a key past its retention may be gone at any
// moment, and one inside it may not.
func TestStepUnknownAndRetention(t *testing.T) {
	in := begin("fp", t0)
	in.ID = 7
	next := Step(cfg, State{}, in, Output{Unknown: true})
	if len(next) != 2 || next[0].Exists || !next[1].Exists || next[1].Token != Placeholder || !next[1].LockUncertain || next[1].Used != "" {
		t.Errorf("unknown Begin on no row: %+v, want no row or an uncertain claim by the placeholder, not recorded as used", next)
	}
	done := inFlight(t0, "t1")
	done.Done, done.Response = true, resp
	fresh := claimed("t2", t0.Add(time.Second), false)
	if next := Step(cfg, done, begin("fp", t0.Add(time.Second)), fresh); len(next) != 0 {
		t.Errorf("a done key claimed again inside its retention: allowed %+v", next)
	}
	later := t0.Add(cfg.Retention)
	if next := Step(cfg, done, begin("fp", later), claimed("t2", later, false)); len(next) != 1 {
		t.Errorf("a done key claimed again once past its retention: %+v, want allowed", next)
	}
	if next := Step(cfg, done, begin("fp", later), claimed("t1", later, false)); len(next) != 0 {
		t.Errorf("a pruned key's token handed out again: allowed %+v", next)
	}
}

// TestUnknownClaimAtTheStoresGrain: a claim whose Begin never answered
// is placed RequestClockGrain before its Now: a store that read that Now
// to the microsecond (the exec protocol's grain) or the millisecond, and
// took the claim over at exactly LockTTL by its own reading, is right; a
// takeover earlier than that grain allows is still a violation.
func TestUnknownClaimAtTheStoresGrain(t *testing.T) {
	asked := t0.Add(418 * time.Nanosecond) // the harness's Now; the store read t0
	var uncertain State
	for _, s := range Step(cfg, State{}, begin("fp", asked), Output{Unknown: true}) {
		if s.Exists {
			uncertain = s
		}
	}
	if !uncertain.Exists || !uncertain.LockedAt.Before(asked) || !uncertain.CreatedAt.Equal(uncertain.LockedAt) {
		t.Fatalf("the unanswered claim: %+v, want one placed before its Now", uncertain)
	}
	at := t0.Add(cfg.LockTTL) // exactly LockTTL by the store's reading
	if next := Step(cfg, uncertain, begin("fp", at), claimed("t2", at, true)); len(next) != 1 {
		t.Errorf("a takeover at exactly LockTTL after an unanswered claim, by the store's clock: %+v, want allowed", next)
	}
	early := asked.Add(cfg.LockTTL - RequestClockGrain - time.Microsecond)
	if next := Step(cfg, uncertain, begin("fp", early), claimed("t2", early, true)); len(next) != 0 {
		t.Errorf("a takeover more than the clock's grain before LockTTL: allowed %+v", next)
	}
	if next := Step(cfg, uncertain, begin("fp", at), Output{Decision: stores.Decision{Outcome: stores.InFlight, DecidedAt: at}}); len(next) != 1 {
		t.Errorf("a 409 at LockTTL on a claim whose lock time is uncertain: %+v, want allowed", next)
	}
}

// TestDeclaredSemantics: each declared semantic allows what it says, and
// the same history without the declaration is a violation.
func TestDeclaredSemantics(t *testing.T) {
	claim := inFlight(t0, "t1")
	late := t0.Add(cfg.LockTTL)
	lateSave := Input{Kind: Complete, Key: key, Token: "t1", Response: resp, Now: late}
	leaseBound := cfg
	leaseBound.Semantics.LeaseBoundWrites = true
	if len(Step(cfg, claim, lateSave, Output{Fenced: true})) != 0 {
		t.Error("the contract: the owner's save after its lease, nobody having taken over, must land")
	}
	if len(Step(leaseBound, claim, lateSave, Output{Fenced: true})) != 1 {
		t.Error("LeaseBoundWrites: the owner's save after its lease may be fenced")
	}
	early := lateSave
	early.Now = t0.Add(cfg.LockTTL / 2)
	if len(Step(leaseBound, claim, early, Output{Fenced: true})) != 0 {
		t.Error("LeaseBoundWrites: a save inside the lease must still land")
	}

	keeps := cfg
	keeps.Semantics.ReleaseKeepsFingerprint = true
	release := Input{Kind: Release, Key: key, Token: "t1", Now: t0}
	other := Output{Decision: stores.Decision{Outcome: stores.Mismatch, DecidedAt: t0.Add(time.Second)}}
	for _, c := range []struct {
		cfg  Config
		want int
	}{{cfg, 0}, {keeps, 1}} {
		after := Step(c.cfg, claim, release, Output{})
		if len(after) != 1 {
			t.Fatalf("release: %v", after)
		}
		if got := len(Step(c.cfg, after[0], begin("other", t0.Add(time.Second)), other)); got != c.want {
			t.Errorf("ReleaseKeepsFingerprint=%v: 422 to other parameters after a release allowed %d, want %d", c.cfg.Semantics.ReleaseKeepsFingerprint, got, c.want)
		}
		again := Step(c.cfg, after[0], begin("fp", t0.Add(time.Second)), claimed("t2", t0.Add(time.Second), false))
		if len(again) != 1 {
			t.Errorf("ReleaseKeepsFingerprint=%v: the same parameters must claim again: %v", c.cfg.Semantics.ReleaseKeepsFingerprint, again)
		}
	}

	long := begin("fp", t0)
	long.Lease = time.Second
	held := Step(cfg, State{}, long, claimed("t1", t0, false))
	if len(held) != 1 || held[0].Lease != time.Second {
		t.Fatalf("a claim with its own lease: %v", held)
	}
	at := t0.Add(500 * time.Millisecond) // past LockTTL, inside the claim's lease
	if len(Step(cfg, held[0], begin("fp", at), claimed("t2", at, true))) != 0 {
		t.Error("a takeover inside the claim's own lease must be refused")
	}
	if len(Step(cfg, held[0], begin("fp", at), Output{Decision: stores.Decision{Outcome: stores.InFlight, DecidedAt: at}})) != 1 {
		t.Error("409 inside the claim's own lease must be allowed")
	}

	ext := Input{Kind: Extend, Key: key, Token: "t1", Called: t0.Add(80 * time.Millisecond), Now: t0.Add(81 * time.Millisecond)}
	extended := Step(cfg, claim, ext, Output{})
	if len(extended) != 1 {
		t.Fatalf("extend: %v", extended)
	}
	at = t0.Add(150 * time.Millisecond) // past the first lease, inside the renewed one
	if len(Step(cfg, extended[0], begin("fp", at), claimed("t2", at, true))) != 0 {
		t.Error("a takeover inside the renewed lease must be refused")
	}
	if len(Step(cfg, claim, Input{Kind: Extend, Key: key, Token: "t0", Now: at}, Output{})) != 0 {
		t.Error("an extension under a stale token must be fenced")
	}
}

// TestQuietRelease: undeclared, a Release that is not the owner's must be
// fenced, and a violation of that names the declaration; declared, it may
// answer ok and changes nothing, and a Save still may not.
func TestQuietRelease(t *testing.T) {
	quiet := cfg
	quiet.Semantics.QuietRelease = true
	claim := inFlight(t0, "t1")
	foreign := Input{Kind: Release, Key: key, Token: "t0", Now: t0}
	if len(Step(cfg, claim, foreign, Output{})) != 0 || Hint(cfg, claim, foreign, Output{}) == "" {
		t.Error("the contract: a foreign release answered ok is a violation, and the hint names QuietRelease")
	}
	after := Step(quiet, claim, foreign, Output{})
	if len(after) != 1 || after[0] != claim || Hint(quiet, claim, foreign, Output{}) != "" {
		t.Errorf("QuietRelease: a foreign release answered ok leaves the claim: %v", after)
	}
	if len(Step(quiet, claim, foreign, Output{Fenced: true})) != 1 {
		t.Error("QuietRelease: a foreign release may still be fenced")
	}
	own := Input{Kind: Release, Key: key, Token: "t1", Now: t0}
	if got := Step(quiet, claim, own, Output{}); len(got) != 1 || got[0].Exists {
		t.Errorf("QuietRelease: the owner's release deletes the claim: %v", got)
	}
	save := Input{Kind: Complete, Key: key, Token: "t0", Response: resp, Now: t0}
	if len(Step(quiet, claim, save, Output{})) != 0 || Hint(quiet, claim, save, Output{}) != "" {
		t.Error("QuietRelease: a foreign save answered ok is still a violation")
	}
}

// TestPlaceholderIsNoCallersToken: a claim an unanswered Begin may have
// made is held by a token nobody saw, so a save with any token a caller
// can send (abuse sends "?" among its forged ones) is not the owner's:
// fenced is the answer, not a violation. The placeholder was "?", and a
// correct store that fenced a forged "?" save broke the model.
func TestPlaceholderIsNoCallersToken(t *testing.T) {
	in := begin("fp", t0)
	in.ID = 7
	next := Step(cfg, State{}, in, Output{Unknown: true})
	if len(next) != 2 {
		t.Fatalf("unknown Begin: %+v", next)
	}
	for _, forged := range []stores.Token{"?", "", "made-up-token"} {
		save := Input{Kind: Complete, Key: key, Token: forged, Response: resp, Now: t0.Add(time.Millisecond)}
		if len(Step(cfg, next[1], save, Output{Fenced: true})) != 1 {
			t.Errorf("a save with %q fenced, the key held by an unseen token: forbidden", forged)
		}
	}
}
