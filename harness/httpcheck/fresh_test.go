package httpcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestStuckKeysRefusedBesideFreshKeys: six keys whose owners gave up
// (their first requests went unanswered), held for ever by claims never
// released and answered 429 to every probe over three seconds, are
// refused beside one another: the other calls, their probes, were
// refused too, and a limiter answers so. The fresh keys sent beside the
// probes were answered: the refusals are the keys' own, and past the
// declared in-flight TTL each key is stuck (the run was UNDECIDED,
// however long past the TTL). Beside fresh keys refused too, the keys
// stay unjudged; and a key no owner of which is known to have left its
// claim (a limiter by key may refuse it) stays unjudged, saying that
// fresh keys were answered.
func TestStuckKeysRefusedBesideFreshKeys(t *testing.T) {
	run := func(freshStatus int, ownersGaveUp bool, asked time.Duration) Result {
		e := newEv()
		sec := int64(time.Second)
		for i := range 6 {
			k := fmt.Sprintf("k%d", i)
			if ownersGaveUp {
				e.x(i, "i1", history.PurposeFirst, k, "o"+k, "b"+k, int64(i), 0, 0, "")
			} else {
				e.x(i, "i1", history.PurposeFirst, k, "o"+k, "b"+k, int64(i), int64(i)+5, 429, "slow down")
			}
			for p := range 10 {
				at := sec + int64(p)*sec/3 + int64(i)
				e.h.AddExchange(history.Exchange{Client: -1, Instance: "i1", Purpose: history.PurposeProbe, Key: k, HasKey: true, Order: "o" + k, Body: "b" + k,
					Attempt: p + 1, Call: at, Return: at + 1, Status: 429, Reply: "in flight", RetryAfter: int64(asked)})
			}
		}
		for n := range 3 {
			at := sec + int64(n)*sec + sec/2
			e.x(-1, "i1", history.PurposeFresh, fmt.Sprintf("f%d", n), fmt.Sprintf("of%d", n), "bf", at, at+2, freshStatus, "ok")
			if freshStatus == 201 {
				e.charge(fmt.Sprintf("of%d", n), "i1", at+1)
			}
		}
		return e.resultBy(t, Liveness, Policy{InFlightTTL: 500 * time.Millisecond})
	}
	r := run(201, true, 0)
	if r.Pass || len(r.Violations) != 6 {
		t.Fatalf("six keys refused past their TTL while fresh keys were answered: %+v, want six stuck keys", r)
	}
	if v := r.Violations[0]; v.Cause != CauseThrottled || !strings.Contains(v.Detail, "fresh keys sent beside its probes") {
		t.Fatalf("the violation does not say the fresh keys were answered: %+v", v)
	}
	if r := run(429, true, 0); !r.Pass || !strings.Contains(r.Unjudged, "refused so many of the other calls") {
		t.Fatalf("keys refused beside fresh keys refused too (a limiter): %+v, want them not judged", r)
	}
	if r := run(201, false, 0); !r.Pass || !strings.Contains(r.Unjudged, "while fresh keys sent beside them were answered") || !strings.Contains(r.Unjudged, "a limiter that goes by the key") {
		t.Fatalf("keys of no owner known to have left, refused while fresh keys were answered: %+v, want them not judged, saying so", r)
	}
	// Refused with a Retry-After past the end of the probes (a limiter
	// by the key, 60 s, in front of a correct service): the probes could
	// not honour it, and the refusals say nothing of the keys.
	if r := run(201, true, time.Minute); !r.Pass || !strings.Contains(r.Unjudged, "asked to wait 1m0s (Retry-After)") || !strings.Contains(r.Unjudged, "a longer --settle") {
		t.Fatalf("keys refused with a Retry-After past the probes: %+v, want them not judged", r)
	}
	// One the probes honoured judges as before.
	if r := run(201, true, 200*time.Millisecond); r.Pass || len(r.Violations) != 6 {
		t.Fatalf("keys refused with a Retry-After the probes honoured: %+v, want six stuck keys", r)
	}
}

// TestGatewayPageIsNoSavedError: a key whose charge went through but no
// client got its success answers its probes nginx's 502 page, as does
// every fresh key beside them: the gateway answered, not the service,
// and the key is not judged (it was counted as a saved error,
// replayed). Fresh keys answered by the service leave it settled.
func TestGatewayPageIsNoSavedError(t *testing.T) {
	page := "<html><body><h1>502 Bad Gateway</h1></body></html>"
	run := func(freshStatus int, freshReply string) Result {
		e := newEv()
		sec := int64(time.Second)
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		e.chargeOutcome("o", "i1", 20, 30, history.OutcomeCharged)
		for p := range 4 {
			at := sec + int64(p)*sec/2
			e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", at, at+1, 502, page)
		}
		for n := range 2 {
			at := sec + int64(n)*sec/2 + sec/4
			e.x(-1, "i1", history.PurposeFresh, fmt.Sprintf("f%d", n), fmt.Sprintf("of%d", n), "bf", at, at+2, freshStatus, freshReply)
		}
		return e.result(t, Liveness)
	}
	if r := run(502, page); !r.Pass || !strings.Contains(r.Unjudged, "as did every fresh key sent beside them") {
		t.Fatalf("a key answered the gateway's page, as every fresh key was: %+v, want it not judged", r)
	}
	if r := run(201, "ok"); !r.Pass || r.Unjudged != "" {
		t.Fatalf("a key replaying its 5xx beside fresh keys answered: %+v, want it settled", r)
	}
}
