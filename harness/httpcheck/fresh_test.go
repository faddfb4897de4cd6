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
	run := func(freshStatus int, ownersGaveUp bool) Result {
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
				e.x(-1, "i1", history.PurposeProbe, k, "o"+k, "b"+k, at, at+1, 429, "in flight")
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
	r := run(201, true)
	if r.Pass || len(r.Violations) != 6 {
		t.Fatalf("six keys refused past their TTL while fresh keys were answered: %+v, want six stuck keys", r)
	}
	if v := r.Violations[0]; v.Cause != CauseThrottled || !strings.Contains(v.Detail, "fresh keys sent beside its probes") {
		t.Fatalf("the violation does not say the fresh keys were answered: %+v", v)
	}
	if r := run(429, true); !r.Pass || !strings.Contains(r.Unjudged, "refused so many of the other calls") {
		t.Fatalf("keys refused beside fresh keys refused too (a limiter): %+v, want them not judged", r)
	}
	if r := run(201, false); !r.Pass || !strings.Contains(r.Unjudged, "while fresh keys sent beside them were answered") || !strings.Contains(r.Unjudged, "a limiter that goes by the key") {
		t.Fatalf("keys of no owner known to have left, refused while fresh keys were answered: %+v, want them not judged, saying so", r)
	}
}
