package httpcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestAtMostOncePausedPastTheLease: a second charge while the first's
// instance was paused across the provider's answer (or after the second's
// instance resumed from a pause that spanned the first charge) is
// at-least-once after a pause, excused with a note; a pause away from the
// charges, or a success in between, excuses nothing.
func TestAtMostOncePausedPastTheLease(t *testing.T) {
	const ms = int64(time.Millisecond)
	build := func(pause history.Fault, successBetween bool) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10*ms, 0, 0, "")
		e.chargeOutcome("o", "i1", 20*ms, 40*ms, history.OutcomeCharged)
		if successBetween {
			e.x(1, "i1", history.PurposeReplay, "k", "o", "b", 100*ms, 120*ms, 200, `{"charge":"ch_1"}`)
		}
		e.h.AddFault(pause)
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 6000*ms, 6100*ms, 200, `{"charge":"ch_2"}`)
		cs := append(e.l.Charges(), history.Charge{ID: "ch_2", Order: "o", Via: "i2", At: 6050 * ms, End: 6060 * ms,
			Outcome: history.OutcomeCharged, Effective: true, Client: -1})
		e.l = history.LedgerOf(cs)
		return e.result(t, AtMostOnce)
	}
	pause := func(inst string, from, to int64) history.Fault {
		return history.Fault{Client: -1, Kind: history.FaultInstancePause, Failpoint: inst, Start: from * ms, End: to * ms}
	}
	if r := build(pause("i1", 35, 6500), false); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "pause") {
		t.Fatalf("the owner paused across the provider's answer: %+v", r)
	}
	if r := build(pause("i1", 35, 6500), true); r.Pass {
		t.Fatalf("a success between the charges was excused by the pause: %+v", r)
	}
	wantCause(t, build(pause("i1", 1000, 1200), false), CauseConcurrent)
	wantCause(t, build(pause("i2", 35, 6500), false), CauseConcurrent)

	// Two per-process locks racing: the provider made both charges at
	// once, and i1 was paused 450 ms after it answered the first. No
	// lease ran out between them: not excused (it was, as a pause across
	// the charge).
	raced := newEv()
	raced.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10*ms, 60*ms, 200, `{"charge":"ch_1"}`)
	raced.x(1, "i2", history.PurposeRace, "k", "o", "b", 12*ms, 62*ms, 200, `{"charge":"ch_2"}`)
	raced.chargeOutcome("o", "i1", 20*ms, 47*ms, history.OutcomeCharged)
	raced.l = history.LedgerOf(append(raced.l.Charges(), history.Charge{ID: "ch_2", Order: "o", Via: "i2", At: 23 * ms, End: 50 * ms,
		Outcome: history.OutcomeCharged, Effective: true, Client: -1}))
	raced.h.AddFault(pause("i1", 495, 945))
	wantCause(t, raced.result(t, AtMostOnce), CauseConcurrent)
	// Nor a pause that began after the second charge.
	wantCause(t, build(pause("i1", 6055, 6500), false), CauseConcurrent)

	// The owner i1 got the key's request, and stood still (paused) before
	// charging; its lease ran out, i2 took the key over, charged, and a
	// client got the success; i1 resumed and charged as it was about to:
	// at-least-once after a pause, excused whatever came in between. A
	// request that reached i1 only during the pause must find the key done.
	resumed := func(sentAt int64) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", sentAt*ms, 0, 0, "")
		e.h.AddFault(pause("i1", 15, 4000))
		e.x(1, "i2", history.PurposeRetry, "k", "o", "b", 2000*ms, 2100*ms, 200, `{"charge":"ch_1"}`)
		e.chargeOutcome("o", "i2", 2050*ms, 2060*ms, history.OutcomeCharged)
		e.chargeOutcome("o", "i1", 4004*ms, 4010*ms, history.OutcomeCharged)
		return e.result(t, AtMostOnce)
	}
	if r := resumed(10); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "stood still") {
		t.Fatalf("an owner paused past its lease, resumed after a takeover: %+v", r)
	}
	if r := resumed(20); r.Pass {
		t.Fatalf("a request queued during the pause, charged again on resuming, was excused: %+v", r)
	}

	// The mirror: the stale owner i1 charges first, just after its pause,
	// and the taker i2, whose request came during the pause (the lease
	// had run out), charges second: excused. A taker whose request came
	// after the pause ended met a live owner: not excused.
	mirror := func(takerAt int64) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10*ms, 0, 0, "")
		e.h.AddFault(pause("i1", 15, 4000))
		e.x(1, "i2", history.PurposeRetry, "k", "o", "b", takerAt*ms, 0, 0, "")
		e.chargeOutcome("o", "i1", 4004*ms, 4010*ms, history.OutcomeCharged)
		e.chargeOutcome("o", "i2", 4050*ms, 4060*ms, history.OutcomeCharged)
		return e.result(t, AtMostOnce)
	}
	if r := mirror(2000); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "stood still") {
		t.Fatalf("the stale owner charging first, the taker second: %+v", r)
	}
	if r := mirror(4002); r.Pass {
		t.Fatalf("a taker that came after the pause was excused: %+v", r)
	}
}
