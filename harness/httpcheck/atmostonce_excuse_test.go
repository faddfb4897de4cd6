package httpcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

const msec = int64(time.Millisecond)

// TestKillExcusesOnlyChargesOfTheKilledProcess: a kill excuses a second
// charge only when the first was made by the process it killed. In a
// real run i1 was killed at 12435.7 ms and seen ready at 13045.6 ms, but
// it was serving before that: it took a request at 13013.2 ms and made
// ch_1 at 13020.8 ms, and ch_2 came later on i2. Both charges came after
// the kill: not excused (it was, the kill's window reaching past ch_1).
// Nor a charge made once the restarted instance had answered a request
// sent after the signal, though within the slack after it. A charge the
// provider counted just after the signal stays excused.
func TestKillExcusesOnlyChargesOfTheKilledProcess(t *testing.T) {
	kill := func(e *ev, from, to int64) {
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i1", Start: from, End: to})
	}
	e := newEv()
	kill(e, 124357*msec/10, 130456*msec/10)
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 130132*msec/10, 0, 0, "")
	e.chargeOutcome("o", "i1", 130208*msec/10, 130400*msec/10, history.OutcomeCharged)
	e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 14000*msec, 14100*msec, 200, `{"charge":"ch_2"}`)
	e.charge("o", "i2", 14050*msec)
	if r := e.result(t, AtMostOnce); r.Pass || len(r.Notes) != 0 {
		t.Fatalf("both charges after the kill's signal, the first by the restarted i1, were excused: %+v", r)
	}

	back := func(otherAnswered bool) Result {
		e := newEv()
		kill(e, 1000*msec, 1700*msec)
		if otherAnswered {
			// The restarted i1 answers another order's request.
			e.x(1, "i1", history.PurposeFirst, "k2", "o2", "b2", 1100*msec, 1150*msec, 200, `{"charge":"ch_9"}`)
		}
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 1180*msec, 0, 0, "")
		e.chargeOutcome("o", "i1", 1200*msec, 1220*msec, history.OutcomeCharged)
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 3000*msec, 3100*msec, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 3050*msec)
		return e.result(t, AtMostOnce)
	}
	if r := back(true); r.Pass || len(r.Notes) != 0 {
		t.Fatalf("a charge made after the restarted i1 answered a request was excused as one before the kill: %+v", r)
	}
	if r := back(false); !r.Pass || len(r.Notes) != 1 {
		t.Fatalf("a charge counted 200 ms after the signal, nothing saying i1 was back, was not excused: %+v", r)
	}

	// The provider counts the charge 30 ms after the signal: the
	// process sent it just before it died.
	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 900*msec, 0, 0, "")
	kill(e, 1000*msec, 1700*msec)
	e.chargeOutcome("o", "i1", 1030*msec, 1040*msec, history.OutcomeHungUp)
	e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 3000*msec, 3100*msec, 200, `{"charge":"ch_2"}`)
	e.charge("o", "i2", 3050*msec)
	if r := e.result(t, AtMostOnce); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "killed i1") {
		t.Fatalf("a charge counted just after the signal was not excused: %+v", r)
	}
	// Neither charge carried a downstream key: the excuse says that
	// one would have made the re-run of no effect (a service with the
	// key only at the top hop passed saying only "excused").
	if r := e.result(t, AtMostOnce); !strings.Contains(r.Notes[0], "neither charge carried a downstream key") {
		t.Errorf("the excuse of two charges without a downstream key: %q", r.Notes[0])
	}
}

// TestPauseShorterThanTheDeclaredLease: with --inflight-ttl declared, a
// pause excuses a second charge only if the owner's lease can have run
// out in it. In a real run the provider answered ch_1 503 at 9941.4 ms,
// idemcheck paused i2 from 9956 to 10553 ms, and the same request
// charged again at 10556 ms: excused as a pause that outlived the lease,
// under a declared 30 s lease. Undeclared, it stays excused. A declared
// lease the pause can have outlasted (the owner's request sent long
// enough before it ended) still excuses.
func TestPauseShorterThanTheDeclaredLease(t *testing.T) {
	build := func(sent int64) *ev {
		e := newEv()
		e.x(0, "i2", history.PurposeFirst, "k", "o", "b", sent, 10600*msec, 200, `{"charge":"ch_2"}`)
		e.chargeOutcome("o", "i2", 9900*msec, 99414*msec/10, history.OutcomeFailed)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstancePause, Failpoint: "i2", Start: 9956 * msec, End: 10553 * msec})
		e.chargeOutcome("o", "i2", 10556*msec, 10580*msec, history.OutcomeCharged)
		return e
	}
	r := build(9800*msec).resultBy(t, AtMostOnce, Policy{InFlightTTL: 30 * time.Second})
	if r.Pass || len(r.Notes) != 0 {
		t.Fatalf("a 597 ms pause under a declared 30 s lease was excused: %+v", r)
	}
	if d := r.Violations[0].Detail; !strings.Contains(d, "paused i2 for 597ms between them, too short for the declared --inflight-ttl 30s") {
		t.Errorf("the violation does not say why the pause excused nothing: %s", d)
	}
	if r := build(9800*msec).result(t, AtMostOnce); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "pause") {
		t.Fatalf("no lease declared: the pause no longer excuses: %+v", r)
	}
	// A 1 s lease taken with the request at 9800 ms runs out at 10800
	// ms: after the second charge at 10556 ms, so no takeover before it.
	if r := build(9800*msec).resultBy(t, AtMostOnce, Policy{InFlightTTL: time.Second}); r.Pass {
		t.Fatalf("a 1 s lease taken at 9800 ms was excused as run out by 10556 ms: %+v", r)
	}
	// Taken at 9500 ms, it can have run out at 10500 ms, in the pause.
	if r := build(9500*msec).resultBy(t, AtMostOnce, Policy{InFlightTTL: time.Second}); !r.Pass || len(r.Notes) != 1 {
		t.Fatalf("a 1 s lease taken 1 s before the pause ended was not excused: %+v", r)
	}
}

// TestStaleOwnerUnderTheDeclaredLease: an owner paused from before its
// charge, whose key another request took over and charged meanwhile, is
// excused only if its lease, taken no earlier than its request was sent,
// can have run out before the taker charged.
func TestStaleOwnerUnderTheDeclaredLease(t *testing.T) {
	resumed := func(ttl time.Duration) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10*msec, 0, 0, "")
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstancePause, Failpoint: "i1", Start: 15 * msec, End: 4000 * msec})
		e.x(1, "i2", history.PurposeRetry, "k", "o", "b", 2000*msec, 2100*msec, 200, `{"charge":"ch_1"}`)
		e.chargeOutcome("o", "i2", 2050*msec, 2060*msec, history.OutcomeCharged)
		e.chargeOutcome("o", "i1", 4004*msec, 4010*msec, history.OutcomeCharged)
		return e.resultBy(t, AtMostOnce, Policy{InFlightTTL: ttl})
	}
	if r := resumed(time.Second); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "stood still") {
		t.Fatalf("a 1 s lease run out in a 4 s pause: %+v", r)
	}
	if r := resumed(30 * time.Second); r.Pass {
		t.Fatalf("a 30 s lease taken at 10 ms was excused as taken over at 2050 ms: %+v", r)
	}
}

// TestRetryWithinOneRequest: a service that retries the provider inside
// one request with a new downstream key per attempt. In a real run i1
// made ch_1 at 322.6 ms (answered 503) and ch_2 at 513.0 ms while one
// request of the order was open on it, the race copy answered 409 by
// i2: the cause stays after-error, but the text says the service
// charged again within that request with a new key, not that it
// released its claim. Another request of the order reaching i1 in
// between leaves the release named.
func TestRetryWithinOneRequest(t *testing.T) {
	build := func(k1, k2 string, another bool) Result {
		e := newEv()
		e.x(3, "i1", history.PurposeFirst, "k", "o", "b", 300*msec, 600*msec, 200, `{"charge":"ch_2"}`)
		e.x(3, "i2", history.PurposeRace, "k", "o", "b", 301*msec, 320*msec, 409, "in flight")
		if another {
			e.x(4, "i1", history.PurposeRetry, "k", "o", "b", 400*msec, 410*msec, 409, "in flight")
		}
		e.l = history.LedgerOf([]history.Charge{
			{ID: "ch_1", Order: "o", Key: k1, Via: "i1", At: 3226 * msec / 10, End: 340 * msec, Outcome: history.OutcomeFailed, Effective: true, Client: -1},
			{ID: "ch_2", Order: "o", Key: k2, Via: "i1", At: 513 * msec, End: 530 * msec, Outcome: history.OutcomeCharged, Effective: true, Client: -1},
		})
		return e.result(t, AtMostOnce)
	}
	r := build("k-1", "k-2", false)
	wantCause(t, r, CauseAfterError)
	d := r.Violations[0].Detail
	if !strings.Contains(d, "charged again within that one request with a new downstream key (k-1, then k-2") || strings.Contains(d, "release") {
		t.Errorf("a retry inside one request with a new key: %s", d)
	}
	r = build("", "", false)
	wantCause(t, r, CauseAfterError)
	if d := r.Violations[0].Detail; !strings.Contains(d, "within that one request sending the provider no downstream key") {
		t.Errorf("a retry inside one request with no key: %s", d)
	}
	r = build("k-1", "k-2", true)
	wantCause(t, r, CauseAfterError)
	if d := r.Violations[0].Detail; !strings.Contains(d, "release on error") || !strings.Contains(d, "a new downstream key (k-1, then k-2)") {
		t.Errorf("another request reached i1 between the charges: %s, want the release named, and the new key that made it unsafe", d)
	}
	r = build("", "", true)
	if d := r.Violations[0].Detail; !strings.Contains(d, "release on error") || !strings.Contains(d, "no downstream key") {
		t.Errorf("a release on error, no downstream key: %s, want it said", d)
	}
}

// TestAnsweredKeyChargedAgainIsForgotten: a client got a definite answer
// for the key after the provider answered the first charge and before
// the second (a success, or the same saved error replayed): the claim
// was not released after the error, the record was kept and then lost,
// after-done. In real runs a saved 502 replayed for 1.9 s, then the key
// pruned and charged again, and a 503'd charge whose service answered
// 200 after retrying inside, the key charged again much later, were both
// told after-error. The same 502 answered once stays after-error.
func TestAnsweredKeyChargedAgainIsForgotten(t *testing.T) {
	saved := func(replays int) Result {
		e := newEv()
		e.x(1, "i1", history.PurposeFirst, "k", "o", "b", 1000*msec, 1100*msec, 502, `{"error":"provider failed"}`)
		e.chargeOutcome("o", "i1", 1020*msec, 1060*msec, history.OutcomeFailed)
		for i := range replays {
			at := int64(1200+270*i) * msec
			e.x(1, "i2", history.PurposeRetry, "k", "o", "b", at, at+20*msec, 502, `{"error": "provider failed"}`)
		}
		e.x(1, "i2", history.PurposeRetry, "k", "o", "b", 5000*msec, 5100*msec, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 5050*msec)
		return e.result(t, AtMostOnce)
	}
	r := saved(7)
	wantCause(t, r, CauseAfterDone)
	if d := r.Violations[0].Detail; !strings.Contains(d, "the key had been answered before it was charged again (client 1 got 502 from i1 at 1100.0ms, and the same answer was replayed until 2840.0ms (replays: 7))") ||
		!strings.Contains(d, "not released after the error") {
		t.Errorf("a saved 502 replayed, then charged again: %s", d)
	}
	wantCause(t, saved(0), CauseAfterError)

	e := newEv()
	e.x(1, "i1", history.PurposeFirst, "k", "o", "b", 990*msec, 1022*msec, 200, `{"charge":"ch_1"}`)
	e.chargeOutcome("o", "i1", 1000*msec, 1010*msec, history.OutcomeFailed)
	e.x(1, "i2", history.PurposeRetry, "k", "o", "b", 8000*msec, 8100*msec, 200, `{"charge":"ch_2"}`)
	e.charge("o", "i2", 8050*msec)
	r = e.result(t, AtMostOnce)
	wantCause(t, r, CauseAfterDone)
	if d := r.Violations[0].Detail; !strings.Contains(d, "answered before it was charged again (client 1 got 200 from i1 at 1022.0ms)") {
		t.Errorf("a success after the provider's 503, then charged again: %s", d)
	}
}

// TestLostReplyClosesTheRequest: a request whose reply idemcheck's
// network fault lost was answered by the service when its connection
// closed: it is not open 9.2 s later, blamed for two executions at once
// (it was). A connection that closed in a reset window, or a timeout,
// says nothing of the service's work: still open.
func TestLostReplyClosesTheRequest(t *testing.T) {
	build := func(kind history.FaultKind, err string) Result {
		e := newEv()
		e.h.AddExchange(history.Exchange{Client: 2, Instance: "i1", Purpose: history.PurposeFirst, Key: "k", HasKey: true, Order: "o", Body: "b",
			Attempt: 1, Call: 1000 * msec, Return: history.Never, Err: err, ErrAt: 1100 * msec})
		e.h.AddFault(history.Fault{Client: -1, Kind: kind, Failpoint: "i1", Start: 900 * msec, End: 1300 * msec})
		e.chargeOutcome("o", "i1", 1020*msec, 1050*msec, history.OutcomeCharged)
		e.x(2, "i2", history.PurposeRetry, "k", "o", "b", 10250*msec, 10400*msec, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 10300*msec)
		return e.result(t, AtMostOnce)
	}
	const closed = "connection closed without an answer"
	wantCause(t, build(history.FaultNetLostReply, closed), CauseAfterDone)
	wantCause(t, build(history.FaultNetReset, closed), CauseConcurrent)
	wantCause(t, build(history.FaultNetLostReply, "timeout"), CauseConcurrent)
}

// TestHangUpsAtOnceAreACrash: an instance killed outside idemcheck (a
// --target the user stops) hangs up on its charges at once: three
// connections closed within 0.5 ms, one of them charged again later. It
// was said to be the service's own deadline, a claim released after an
// error; it is a crash (after-crash), idemcheck having killed nothing.
// One charge hung up alone is still the service's deadline.
func TestHangUpsAtOnceAreACrash(t *testing.T) {
	run := func(others int) Result {
		e := newEv()
		e.x(0, "", history.PurposeFirst, "k", "o", "b", 4400*msec, 0, 0, "")
		e.chargeOutcome("o", "", 4423*msec, 4438*msec, history.OutcomeHungUp)
		for i := range others {
			e.chargeOutcome(fmt.Sprintf("p%d", i), "", 4420*msec, 4438*msec+int64(i)*msec/10, history.OutcomeHungUp)
		}
		e.x(1, "", history.PurposeRetry, "k", "o", "b", 15000*msec, 15200*msec, 200, `{"charge":"ch_9"}`)
		e.charge("o", "", 15125*msec)
		return e.result(t, AtMostOnce)
	}
	r := run(2)
	wantCause(t, r, CauseAfterCrash)
	if !strings.Contains(r.Violations[0].Detail, "its process died (outside idemcheck's knowledge") {
		t.Errorf("detail: %s", r.Violations[0].Detail)
	}
	wantCause(t, run(0), CauseAfterError)
}
