package httpcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

func TestLivenessCauses(t *testing.T) {
	for _, tc := range []struct {
		status int
		cause  string
	}{{409, CauseInFlight}, {423, CauseLocked}, {429, CauseThrottled}, {500, CauseServerError}, {0, CauseNoAnswer}} {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 8, 503, "down")
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 20, tc.status, "busy since 10")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 30, 40, tc.status, "busy since 30")
		wantCause(t, e.result(t, Liveness), tc.cause)
	}
	// The same 5xx replayed for an order never charged, and no success
	// ever for the key: a service that saves every error (declared) is
	// settled; undeclared, the key is not judged (it may be stuck).
	saved := func(p Policy) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 8, 502, `{"error":"upstream"}`)
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 20, 502, `{"error":"upstream"}`)
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 30, 40, 502, `{"error":"upstream"}`)
		return e.resultBy(t, Liveness, p)
	}
	if r := saved(Policy{}); !r.Pass || !strings.Contains(r.Unjudged, "--saves-errors") {
		t.Errorf("a replayed 5xx, undeclared: %+v, want it not judged", r)
	}
	if r := saved(Policy{SavesErrors: true}); !r.Pass || r.Unjudged != "" || len(r.Notes) != 1 {
		t.Errorf("a replayed 5xx, declared: %+v, want it settled with a note", r)
	}
	// One probe only (--settle ran out): the answer before it, to any
	// attempt, shows the replay.
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 8, 502, `{"error":"upstream"}`)
	e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 9, 12, 502, `{"error":"upstream"}`)
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 20, 25, 502, `{"error":"upstream"}`)
	if r := e.resultBy(t, Liveness, Policy{SavesErrors: true}); !r.Pass || len(r.Notes) != 1 {
		t.Errorf("a saved 5xx with one probe, declared: %+v, want it settled", r)
	}
	// A saved error for a charge the provider failed is a definite answer.
	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 30, 500, "provider failed")
	e.chargeOutcome("o", "i1", 10, 20, history.OutcomeFailed)
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 40, 50, 500, "provider failed")
	e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 60, 70, 500, "provider failed")
	if r := e.result(t, Liveness); !r.Pass || len(r.Notes) != 1 {
		t.Fatalf("a replayed saved error failed liveness: %+v", r)
	}
	e = newEv()
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 20, 409, "busy")
	e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 30, 40, 200, "A")
	if r := e.result(t, Liveness); !r.Pass {
		t.Fatalf("%+v", r)
	}
	// The provider charged and answered, but the service's deadline
	// passed first (no client ever got a success): its saved error,
	// replayed, is a definite answer. Once a client got a success for the
	// key, a 5xx after healing is not.
	lost := func(success bool) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 30, 500, "deadline exceeded")
		e.chargeOutcome("o", "i1", 10, 29, history.OutcomeCharged)
		if success {
			e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 31, 33, 200, "A")
		}
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 40, 50, 500, "deadline exceeded")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 60, 70, 500, "deadline exceeded")
		return e.result(t, Liveness)
	}
	if r := lost(false); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "did not get the charge id") {
		t.Fatalf("a saved error after a lost answer failed liveness: %+v", r)
	}
	wantCause(t, lost(true), CauseServerError)
}

// TestLivenessOrphans: a key still in flight after its request was at an
// instance when that instance was killed is not judged without a declared
// in-flight TTL (a correct service holds it until its TTL, unknown here),
// and the result says so; with a TTL declared, or without a death, it is
// a violation.
func TestLivenessOrphans(t *testing.T) {
	build := func(killed string) *ev {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 0, 0, "") // sent at 5, never answered
		if killed != "" {
			e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: killed, Start: 7, End: 9})
		}
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 20, 409, "busy")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 30, 40, 409, "busy")
		return e
	}
	r := build("i1").result(t, Liveness)
	if !r.Pass || !strings.HasPrefix(r.Unjudged, "1 keys (first k)") {
		t.Fatalf("an orphaned key without a declared TTL: %+v", r)
	}
	wantCause(t, build("i2").result(t, Liveness), CauseInFlight) // another instance died: no excuse
	wantCause(t, build("").result(t, Liveness), CauseInFlight)
	wantCause(t, build("i1").resultBy(t, Liveness, Policy{InFlightTTL: time.Second}), CauseInFlight)

	// A key held is held whatever the service answers while it is: a
	// 429, 425 or 408 (try again later), or a request kept waiting past
	// the client's timeout (a service that makes duplicates wait for the
	// first). A reset or a 5xx says nothing of the key: judged.
	for _, tc := range []struct {
		status   int
		err      string
		unjudged bool
		cause    string
	}{{429, "", true, ""}, {425, "", true, ""}, {408, "", true, ""}, {0, "timeout", true, ""},
		{0, "connection closed without an answer", false, CauseNoAnswer}, {502, "", false, CauseServerError}} {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 0, 0, "")
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i1", Start: 7, End: 9})
		for _, at := range []int64{10, 30} {
			x := history.Exchange{Client: -1, Instance: "i2", Purpose: history.PurposeProbe, Key: "k", HasKey: true, Order: "o", Body: "b",
				Attempt: 1, Call: at, Return: at + 5, Status: tc.status, Reply: fmt.Sprintf("busy since %d", at)}
			if tc.status == 0 {
				x.Return, x.Err, x.ErrAt = history.Never, tc.err, at+5
			}
			e.h.AddExchange(x)
		}
		r := e.result(t, Liveness)
		if tc.unjudged {
			if !r.Pass || r.Unjudged == "" {
				t.Errorf("an orphaned key answered %d %q: %+v, want it not judged", tc.status, tc.err, r)
			}
			continue
		}
		wantCause(t, r, tc.cause)
	}
}
