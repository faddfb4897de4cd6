package models

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// TestAllows: the model's failure message says what the decision table
// expected, with its arithmetic: a claim 61 ms old under a 100 ms lease
// is in flight, and a record inside its retention cannot have been
// pruned (a store that pruned it read the model's source to learn why
// its claim was refused); past retention the removed record's answer
// is offered too.
func TestAllows(t *testing.T) {
	s := inFlight(t0, "t1")
	claim := func(at time.Time) (Input, Output) {
		return Input{Kind: Begin, Key: stores.KeyRef{Key: "k"}, Fingerprint: "fp", Now: at},
			Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "t2", DecidedAt: at}}
	}
	in, out := claim(t0.Add(61 * time.Millisecond))
	if Step(cfg, s, in, out) != nil {
		t.Fatal("a fresh claim of a key in flight 61 ms: the model allowed it")
	}
	got := Allows(cfg, s, in, out)
	for _, want := range []string{"in-flight (the claim is 61ms old, inside its lease of 100ms)", "inside the retention of 10s: no prune or expiry may have removed it yet"} {
		if !strings.Contains(got, want) {
			t.Errorf("Allows = %q, want %q in it", got, want)
		}
	}
	in, out = claim(t0.Add(11 * time.Second))
	got = Allows(cfg, s, in, out)
	if !strings.Contains(got, "claimed (takeover) (the claim is 11s old, past its lease of 100ms); or, with the record removed by retention, claimed") || strings.Contains(got, "inside the retention") {
		t.Errorf("past retention: Allows = %q, want both answers and no retention clause", got)
	}
	if a := Allows(cfg, s, Input{Kind: Release, Token: "t1"}, Output{}); a != "" {
		t.Errorf("Allows of a Release = %q, want none", a)
	}
}

// TestAllowsSaysTheToken: a takeover past the lease, the answer the
// table allows, refused for its token, the owner's kept: the message
// read "allows: claimed (takeover)" of a claimed answer, and never why.
// It says the token was handed out before.
func TestAllowsSaysTheToken(t *testing.T) {
	s := inFlight(t0, "t1")
	at := t0.Add(time.Second)
	in := Input{Kind: Begin, Key: stores.KeyRef{Key: "k"}, Fingerprint: "fp", Now: at}
	out := Output{Decision: stores.Decision{Outcome: stores.Claimed, Takeover: true, Token: "t1", DecidedAt: at}}
	if Step(cfg, s, in, out) != nil {
		t.Fatal("a takeover keeping the owner's token: the model allowed it")
	}
	if got := Allows(cfg, s, in, out); !strings.Contains(got, "claimed (takeover)") || !strings.Contains(got, "token t1 was handed out for it before") {
		t.Errorf("Allows = %q, want the token named", got)
	}
	out.Decision.Token = "t2"
	if got := Allows(cfg, s, in, out); strings.Contains(got, "token") {
		t.Errorf("a new token: Allows = %q, want no word of it", got)
	}
}
