package httpcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

func TestStatusCauses(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.charge("o", "i1", 20)
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 200, "A")
	wantCause(t, e.result(t, Status), CauseReuse)

	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.charge("o", "i1", 20)
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 200, "C")
	e.charge("o2", "i2", 65)
	wantCause(t, e.result(t, Status), CauseReuseRan)

	// A reuse refused with 409 when the key is not in flight is a
	// refusal in another code (a mismatch answered 409, as Brandur
	// Leach's design does): a note, not 409-not-in-flight. A first
	// request's 409 with nothing in flight still is.
	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.charge("o", "i1", 20)
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 409, "mismatch")
	if r := e.result(t, Status); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "advises 422") {
		t.Fatalf("a reuse refused with 409: %+v", r)
	}
	e.x(1, "i2", history.PurposeFirst, "k2", "o3", "b3", 80, 90, 409, "busy")
	wantCause(t, e.result(t, Status), Cause409)

	// The key's owner charged its order and was killed before it saved
	// the answer (no client got a success): its unfinished record expired
	// with its lease, and a reuse that ran as new is excused, as a retry
	// with the key's own body that runs again is. Not after a success for
	// the key, nor without the kill.
	lost := func(killed, success bool) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		e.charge("o", "i1", 20)
		if killed {
			e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i1", Start: 25, End: 300})
		}
		if success {
			e.x(2, "i2", history.PurposeRetry, "k", "o", "b", 1000, 1100, 200, "A")
		}
		e.x(1, "i2", history.PurposeReuse, "k", "o2", "b2", 3000, 3100, 200, "C")
		e.charge("o2", "i2", 3050)
		return e.result(t, Status)
	}
	if r := lost(true, false); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "lost the key's unfinished record") {
		t.Fatalf("a reuse run as new after the owner died unsaved: %+v", r)
	}
	wantCause(t, lost(true, true), CauseReuseRan)
	wantCause(t, lost(false, false), CauseReuseRan)

	// The owner i1 stood still (paused) holding the key's request, past
	// its lease; a reuse ran as new meanwhile; i1 resumed and charged the
	// key's own order after: the key was unknown when the reuse came.
	// Without the pause, the owner was in flight: the reuse must not run.
	stale := func(paused bool, ttl time.Duration) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		if paused {
			e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstancePause, Failpoint: "i1", Start: 15, End: 3800})
		}
		e.x(1, "i2", history.PurposeReuse, "k", "o2", "b2", 2800, 3140, 201, "C")
		e.charge("o2", "i2", 3110)
		e.charge("o", "i1", 3880)
		return e.resultBy(t, Status, Policy{InFlightTTL: ttl})
	}
	if r := stale(true, 0); !r.Pass || len(r.Notes) != 1 {
		t.Fatalf("a reuse run as new while the owner stood still past its lease: %+v", r)
	}
	if r := stale(true, 2*time.Microsecond); !r.Pass || len(r.Notes) != 1 {
		t.Fatalf("a reuse run as new while the owner stood still past its declared lease: %+v", r)
	}
	wantCause(t, stale(false, 0), CauseReuseRan)
	// Under a declared lease longer than the pause, the owner's claim
	// was still live when the reuse came: the reuse must not run.
	wantCause(t, stale(true, 30*time.Second), CauseReuseRan)

	// The key's only request with its own body was lost on the way and
	// its order never charged: to the service the reuse was the key's
	// first request, and running it was right.
	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 200, "C")
	e.charge("o2", "i2", 65)
	if r := e.result(t, Status); !r.Pass {
		t.Errorf("a reuse of a key the service never saw failed: %s", r.Detail)
	}
	// The same, but the lost request did reach the service, which
	// charged its order: the reuse ran as new on a key it had.
	e.charge("o", "i1", 30)
	wantCause(t, e.result(t, Status), CauseReuseRan)

	// The key's own request ended in a 502 once the provider had failed
	// its charge: a service that releases its claim on an error no longer
	// has the key, and runs the reuse as new (excused, and said), unless
	// it declared that it saves its errors. A 502 given while the
	// provider was still making the charge (a timeout's, the handler at
	// work and the key held) excuses nothing.
	released := func(chargeEnd int64) *ev {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 40, 502, "provider failed")
		e.chargeOutcome("o", "i1", 20, chargeEnd, history.OutcomeFailed)
		e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 200, "C")
		e.chargeOutcome("o2", "i2", 65, 66, history.OutcomeCharged)
		return e
	}
	if r := released(30).result(t, Status); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "releases its claim on an error") {
		t.Errorf("a reuse after the key was released on an error: %+v", r)
	}
	wantCause(t, released(30).resultBy(t, Status, Policy{SavesErrors: true}), CauseReuseRan)
	wantCause(t, released(50).result(t, Status), CauseReuseRan)
	// A retry after the 502 whose connection was reset on the way (no
	// answer, no charge since) leaves the excuse; one that reached the
	// work (a repeat of the downstream key at the provider) does not.
	e = released(30)
	e.refused(0, "i1", history.PurposeRetry, "k", "o", "b", 45, 50)
	if r := e.result(t, Status); !r.Pass {
		t.Errorf("a reuse after a released key's retry was lost on the way: %+v", r)
	}
	cs := append(e.l.Charges(), history.Charge{ID: "ch_1", Order: "o", Via: "i1", At: 47, End: 48, Client: -1})
	e.l = history.LedgerOf(cs)
	wantCause(t, e.result(t, Status), CauseReuseRan)

	// Was ran-as-new: the key ran twice (A, then B), and the reuse got
	// the second execution's answer, not the first's; the ledger never
	// charged the reuse's order.
	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.charge("o", "i1", 20)
	e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 60, 90, 200, "B")
	e.charge("o", "i2", 70)
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 100, 110, 200, "B")
	r := e.result(t, Status)
	wantCause(t, r, CauseReuse)
	if !strings.Contains(r.Detail, "client 1") {
		t.Errorf("the detail does not name the answer it repeats: %s", r.Detail)
	}

	e = newEv()
	e.x(0, "i1", history.PurposeMissing, "", "o", "b", 10, 50, 200, "A")
	wantCause(t, e.result(t, Status), CauseMissing)
	if r := Run(Evidence{Hist: e.h, Ledger: e.l, Policy: Policy{KeyOptional: true}}); !r[3].Pass {
		t.Errorf("a request without a key failed although the key was declared optional: %+v", r[3])
	} else if len(r[3].Notes) != 0 {
		t.Errorf("a request without a key served as declared has a note: %q", r[3].Notes)
	}
	// Declared optional, but refused: the declaration looks wrong, and
	// the report says so (the service's 400s went unjudged).
	e = newEv()
	e.x(0, "i1", history.PurposeNoKey, "", "o", "b", 10, 50, 400, "key required")
	if r := e.resultBy(t, Status, Policy{KeyOptional: true}); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "--key required") {
		t.Errorf("a request without a key refused under --key optional: %+v", r)
	}

	e = newEv()
	e.x(0, "i1", history.PurposeLong, "kkkk", "o", "b", 10, 50, 200, "A")
	wantCause(t, e.result(t, Status), CauseLong)

	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.x(0, "i1", history.PurposeReplay, "k", "o", "b", 60, 70, 409, "busy")
	wantCause(t, e.result(t, Status), Cause409)

	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
	e.x(1, "i2", history.PurposeRace, "k", "o", "b", 12, 20, 409, "busy") // the first is in flight
	e.x(0, "i1", history.PurposeReuse, "k", "o2", "b2", 30, 40, 422, "mismatch")
	if r := e.result(t, Status); !r.Pass || !r.Applied {
		t.Fatalf("%+v", r)
	}
}

// TestTryAgainIsNoAnswerAboutTheKey: a 429, 503, 502, 504, 425 or 408
// (a limiter, a timeout or a gateway in front of the service) after a
// key's first success is not a replay, and to a missing or over-long key
// not a refusal of it: noted, not judged. A 500 still is judged.
func TestTryAgainIsNoAnswerAboutTheKey(t *testing.T) {
	for _, status := range []int{408, 425, 429, 502, 503, 504} {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
		e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 60, 70, status, "busy")
		e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 80, 90, 200, "A")
		e.x(2, "i1", history.PurposeMissing, "", "o2", "b2", 10, 20, status, "busy")
		e.x(2, "i1", history.PurposeLong, "kkkk", "o3", "b3", 30, 40, status, "busy")
		e.x(2, "i1", history.PurposeMissing, "", "o4", "b4", 50, 60, 400, "no key")
		r := e.result(t, Replay)
		if !r.Pass || !r.Applied || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "not judged as replays: 1 answer(s)") {
			t.Errorf("%d after the first success: %+v", status, r)
		}
		r = e.result(t, Status)
		if !r.Pass || !r.Applied || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "not judged: 2 request(s)") {
			t.Errorf("%d to a missing and an over-long key: %+v", status, r)
		}
	}
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 60, 70, 500, "boom")
	if r := e.result(t, Replay); r.Pass {
		t.Errorf("a 500 after the first success passed: %+v", r)
	}
	e.x(2, "i1", history.PurposeMissing, "", "o2", "b2", 10, 20, 500, "boom")
	wantCause(t, e.result(t, Status), CauseMissing)
}

// TestKeyRefusedInAnotherCode: a missing or over-long key refused with
// another 4xx than the draft's 400 (FastAPI's validation answers 422, a
// header limit 431) is a note: refused, nothing ran. Served, it fails.
func TestKeyRefusedInAnotherCode(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeMissing, "", "o", "b", 10, 20, 422, "field required")
	e.x(0, "i1", history.PurposeLong, "kkkk", "o2", "b2", 30, 40, 431, "header too large")
	e.x(0, "i1", history.PurposeLong, "kkkk", "o3", "b3", 50, 60, 422, "too long")
	r := e.result(t, Status)
	if !r.Pass || !r.Applied || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "3 request(s)") || !strings.Contains(r.Notes[0], "2 × 422, 1 × 431") {
		t.Fatalf("keys refused with 422 and 431: %+v", r)
	}
	e.x(0, "i1", history.PurposeLong, "kkkk", "o4", "b4", 70, 80, 201, "served")
	wantCause(t, e.result(t, Status), CauseLong)
}

// TestInFlightAfterAnAnswerThatLeavesItRunning: a 409 after the key's
// only request was answered 503 (a timeout middleware, while the handler
// still charges), 504, 500 (an outcome the service does not know: it
// keeps the claim), 408 or 202 (accepted, to run later) is the key in
// flight, until a completed success of the key shows its work ended.
func TestInFlightAfterAnAnswerThatLeavesItRunning(t *testing.T) {
	for _, status := range []int{202, 408, 500, 503, 504} {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, status, "timed out")
		e.charge("o", "i1", 20)
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 60, 70, 409, "in flight")
		if r := e.result(t, Status); !r.Pass || !r.Applied {
			t.Errorf("a 409 after a %d: %+v", status, r)
		}
		e.x(0, "i1", history.PurposeRetry, "k", "o", "b", 80, 90, 200, "A")
		e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 100, 110, 409, "in flight")
		wantCause(t, e.result(t, Status), Cause409)
	}
	// A reuse's answer holds nothing: a reuse is refused, never run.
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 20, 200, "A")
	e.x(1, "i1", history.PurposeReuse, "k2", "o2", "b2", 30, 40, 503, "timed out")
	e.x(1, "i2", history.PurposeFirst, "k2", "o3", "b3", 50, 60, 409, "in flight")
	wantCause(t, e.result(t, Status), Cause409)
}

// TestInFlightForAGatewaysRetry: a gateway that sends a POST again to
// another instance while the first still works (nginx's
// proxy_next_upstream non_idempotent) gets the truthful 409 of the
// second, which it passes on, though no other request of the client's
// was in flight: the provider, still charging the key's order, shows the
// key was. A 409 long after that charge was answered is still judged.
func TestInFlightForAGatewaysRetry(t *testing.T) {
	const ms = int64(time.Millisecond)
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 0, 1050*ms, 409, "in flight")
	e.chargeOutcome("o", "i1", 120*ms, 1202*ms, history.OutcomeCharged)
	if r := e.result(t, Status); !r.Pass {
		t.Errorf("a 409 while the key's order was being charged: %s", r.Detail)
	}
	e = newEv()
	e.chargeOutcome("o", "i1", 10*ms, 20*ms, history.OutcomeCharged)
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 3000*ms, 3050*ms, 409, "in flight")
	wantCause(t, e.result(t, Status), Cause409)
}

// TestInFlightFromAnOwnerPausedPastItsLease: idemcheck paused the owner
// while its request was there, before it charged; its lease ran out,
// and resumed, it found its claim gone (fenced) and answered 409, as
// docs/spec.md says: a note, not 409-not-in-flight. (Paused after its
// charge, the charge shows the key at work: [outstanding].) The same 409
// from an instance no pause held is still judged.
func TestInFlightFromAnOwnerPausedPastItsLease(t *testing.T) {
	const ms = int64(time.Millisecond)
	build := func(paused string) *ev {
		e := newEv()
		e.x(0, "i2", history.PurposeFirst, "k", "o", "b", 1300*ms, 4226*ms, 409, `{"error":"claim taken over"}`)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstancePause, Failpoint: paused, Start: 1430 * ms, End: 4220 * ms})
		return e
	}
	if r := build("i2").result(t, Status); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "paused") {
		t.Errorf("a 409 from an owner paused past its lease: %+v", r)
	}
	wantCause(t, build("i3").result(t, Status), Cause409)
}

// TestStatusSaysWhatItDidNotJudge: a status-codes result names the cases
// none of whose answers it judged (a run whose slow provider left no
// reuse and no over-long key answered said only what it judged).
func TestStatusSaysWhatItDidNotJudge(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, `{"charge":"ch_1"}`)
	e.charge("o", "i1", 20)
	e.x(1, "i2", history.PurposeRace, "k", "o", "b", 15, 20, 409, "busy")
	r := e.result(t, Status)
	if !r.Pass || !strings.Contains(r.Detail, "judged 1 409; none answered, so not judged: missing key, over-long key, key reused with another body") {
		t.Fatalf("%+v", r)
	}
}

// TestStatusSaysTheOrderAloneIsNotTested: reuses judged read as every
// fingerprint tested, but none keeps the key's order with another
// amount: a service fingerprinting the order alone passed, nothing
// said. The pass says so, and says nothing of it without reuses.
func TestStatusSaysTheOrderAloneIsNotTested(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.charge("o", "i1", 20)
	e.x(0, "i2", history.PurposeMissing, "", "o1", "b1", 55, 58, 400, "no key")
	if r := e.result(t, Status); strings.Contains(r.Detail, "order alone") {
		t.Fatalf("no reuse, yet the detail speaks of one: %s", r.Detail)
	}
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 422, "mismatch")
	if r := e.result(t, Status); !r.Pass || !strings.Contains(r.Detail, "not tested: a fingerprint of the order alone") {
		t.Fatalf("a reuse judged: %+v", r)
	}
}

// TestStatus409BesideAnUnseenCopy: nginx sent the client's POST to i1,
// gave up on it after 100 ms (proxy_read_timeout) and sent it to i2
// (proxy_next_upstream non_idempotent), which answered 409: i1's copy,
// still in its work before the charge, held the key, and charged the
// order at 175 ms while no client request of the key was open. The 409
// is the truth, said in a note; without that later charge it is a 409
// with nothing in flight.
func TestStatus409BesideAnUnseenCopy(t *testing.T) {
	ms := int64(time.Millisecond)
	run := func(charged bool) Result {
		e := newEv()
		e.x(3, "i1", history.PurposeFirst, "k", "o", "b", 9*ms, 118*ms, 409, "in flight")
		e.x(3, "i2", history.PurposeRetry, "k", "o", "b", 137*ms, 140*ms, 409, "in flight")
		// A retry open as the copy charged, answered 409: it ran nothing.
		e.x(3, "i2", history.PurposeRetry, "k", "o", "b", 170*ms, 180*ms, 409, "in flight")
		if charged {
			e.charge("o", "i1", 175*ms)
		}
		e.x(3, "i3", history.PurposeRetry, "k", "o", "b", 200*ms, 268*ms, 200, `{"charge":"ch_1"}`)
		return e.result(t, Status)
	}
	if r := run(true); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "a copy of a request that no client saw held the key") {
		t.Fatalf("409s beside a copy no client saw: %+v", r)
	}
	wantCause(t, run(false), Cause409)
}

// TestStatus409BesideCopiesElsewhere: a 409 before its key's charge,
// made while a client retry of the key was open (the retry, or a copy
// no client saw, may have made it), is excused in a run whose gateway
// is known to resend (another key's charge had no client request open
// to make it), and not in a run without such a charge.
func TestStatus409BesideCopiesElsewhere(t *testing.T) {
	ms := int64(time.Millisecond)
	run := func(gateway bool) Result {
		e := newEv()
		e.x(1, "i1", history.PurposeFirst, "k", "o", "b", 273*ms, 375*ms, 409, "in flight")
		e.x(1, "i1", history.PurposeRetry, "k", "o", "b", 387*ms, 389*ms, 409, "in flight")
		e.x(1, "i1", history.PurposeRetry, "k", "o", "b", 422*ms, 0, 0, "")
		e.charge("o", "i1", 426*ms)
		if gateway {
			e.x(2, "i1", history.PurposeFirst, "g", "og", "bg", 10*ms, 110*ms, 409, "in flight")
			e.charge("og", "i1", 160*ms)
		}
		return e.result(t, Status)
	}
	if r := run(true); !r.Pass {
		t.Fatalf("409s in a run whose gateway resends: %+v", r)
	}
	wantCause(t, run(false), Cause409)
}

// TestStatusReuseRefusedOtherwise: a reuse refused 400, not the draft's
// 422, passed with nothing said; it is a note now. A reuse run as new
// for a key whose every request a limiter refused (its order never
// charged: new to the service) is right, and no note blames a release
// on error for it.
func TestStatusReuseRefusedOtherwise(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.charge("o", "i1", 20)
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 400, "mismatch")
	if r := e.result(t, Status); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "1 keys reused with another body were refused with 400") {
		t.Fatalf("a reuse refused 400: %+v", r)
	}
	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "q", "oq", "b", 10, 15, 503, "<html>503 Service Temporarily Unavailable</html>")
	e.x(0, "i1", history.PurposeRetry, "q", "oq", "b", 20, 25, 503, "<html>503 Service Temporarily Unavailable</html>")
	e.x(1, "i2", history.PurposeReuse, "q", "oq2", "b2", 60, 70, 201, "B")
	e.charge("oq2", "i2", 65)
	if r := e.result(t, Status); !r.Pass || len(r.Notes) != 0 {
		t.Fatalf("a reuse of a key the service never had, run as new: %+v", r)
	}
}
