package httpcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestStuckKeyAnswering503RetryAfter: a key whose owner died after the
// provider charged its order, held for ever by a claim no takeover
// ends, answers every probe 503 with a Retry-After, past the declared
// in-flight TTL, while fresh keys are answered. The service asks for a
// later try: the key has no answer yet, and it is stuck (its 503s were
// taken for a saved error, replayed, and a service stuck on the key
// passed liveness). The same 503 without a Retry-After stays what it
// was: a saved error for a charge the service never got the id of, and
// so does one with a Retry-After where the service declared that it
// saves its errors (--saves-errors).
func TestStuckKeyAnswering503RetryAfter(t *testing.T) {
	run := func(retryAfter time.Duration, saves bool) Result {
		e := newEv()
		sec := int64(time.Second)
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		e.chargeOutcome("o", "i1", 20, 30, history.OutcomeCharged)
		for p := range 4 {
			at := sec + int64(p)*(sec+sec/10)
			e.h.AddExchange(history.Exchange{Client: -1, Instance: "i1", Purpose: history.PurposeProbe, Key: "k", HasKey: true, Order: "o", Body: "b",
				Attempt: p + 1, Call: at, Return: at + 1, Status: 503, Reply: `{"error":"temporarily unavailable"}`, RetryAfter: int64(retryAfter)})
		}
		for n := range 4 {
			at := sec + int64(n)*sec + sec/2
			e.x(-1, "i1", history.PurposeFresh, fmt.Sprintf("f%d", n), fmt.Sprintf("of%d", n), "bf", at, at+2, 201, "ok")
			e.charge(fmt.Sprintf("of%d", n), "i1", at+1)
		}
		return e.resultBy(t, Liveness, Policy{InFlightTTL: 500 * time.Millisecond, SavesErrors: saves})
	}
	r := run(time.Second, false)
	if r.Pass || len(r.Violations) != 1 {
		t.Fatalf("a key answered 503 with a Retry-After past its TTL: %+v, want it stuck", r)
	}
	if v := r.Violations[0]; v.Cause != CauseThrottled || !strings.Contains(v.Detail, "Retry-After") {
		t.Fatalf("the violation does not say the service asked for a later try: %+v", v)
	}
	if r := run(0, false); !r.Pass || len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "taken for a saved error, replayed") {
		t.Fatalf("a key replaying a 503 for a charge whose id the service never got: %+v, want it settled", r)
	}
	// A service that declared it saves its errors replays a saved 503
	// whole, Retry-After and all (a middleware that saves the answer).
	if r := run(time.Second, true); !r.Pass || r.Unjudged != "" {
		t.Fatalf("a declared saved 503 with its Retry-After: %+v, want it settled", r)
	}
}

// TestSavedSuccessReplacedBy502: a key got its success, then a 502 of
// the service's own (a race's loser saved its provider error over the
// winner's answer) to every probe, while other keys' probes were refused
// by a limiter and fresh keys sent beside them were answered. No limiter
// answers 502 and no gateway answered the fresh keys so: the service
// lost the key's answer (the run was UNDECIDED, "a claim still held").
// The same refusals as a limiter's 503 stay unjudged, and a 502 that
// the fresh keys got too is a gateway's page.
func TestSavedSuccessReplacedBy502(t *testing.T) {
	page := `{"error":"payment provider answered 409"}`
	run := func(status int, freshStatus int, freshReply string) Result {
		e := newEv()
		sec := int64(time.Second)
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 20, 200, `{"charge":"ch_1"}`)
		e.charge("o", "i1", 12)
		for p := range 10 {
			at := sec + int64(p)*sec/3
			e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", at, at+1, status, page)
		}
		for i := range 3 {
			o := fmt.Sprintf("l%d", i)
			e.x(i+1, "i1", history.PurposeFirst, o, "o"+o, "b"+o, 30, 40, 429, "slow down")
			for p := range 10 {
				at := sec + int64(p)*sec/3 + int64(i) + 1
				e.x(-1, "i1", history.PurposeProbe, o, "o"+o, "b"+o, at, at+1, 429, "slow down")
			}
		}
		for n := range 3 {
			at := sec + int64(n)*sec + sec/2
			e.x(-1, "i1", history.PurposeFresh, fmt.Sprintf("f%d", n), fmt.Sprintf("of%d", n), "bf", at, at+2, freshStatus, freshReply)
			if freshStatus == 201 {
				e.charge(fmt.Sprintf("of%d", n), "i1", at+1)
			}
		}
		return e.result(t, Liveness)
	}
	r := run(502, 201, "ok")
	if r.Pass || len(r.Violations) != 1 {
		t.Fatalf("a key answered 502 after its success, fresh keys answered beside it: %+v, want it failed", r)
	}
	if v := r.Violations[0]; v.Key != "k" || v.Cause != CauseServerError || !strings.Contains(v.Detail, "saved answer lost or replaced") || !strings.Contains(v.Detail, "fresh keys sent beside its probes") {
		t.Fatalf("the violation does not say the saved answer was lost: %+v", v)
	}
	if r := run(503, 201, "ok"); !r.Pass || !strings.Contains(r.Unjudged, "a limiter that goes by the key") {
		t.Fatalf("a key refused 503 after its success (a limiter by the key may): %+v, want it not judged", r)
	}
	if r := run(502, 502, page); !r.Pass || !strings.Contains(r.Unjudged, "as did every fresh key sent beside them") {
		t.Fatalf("a key answered the page every fresh key got: %+v, want it not judged", r)
	}
}
