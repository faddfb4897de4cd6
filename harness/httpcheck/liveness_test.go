package httpcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

func TestLivenessCauses(t *testing.T) {
	sec := int64(time.Second)
	for _, tc := range []struct {
		status int
		cause  string
	}{{409, CauseInFlight}, {423, CauseLocked}, {429, CauseThrottled}, {500, CauseServerError}, {0, CauseNoAnswer}} {
		e := newEv()
		// Refused in the load while no request of the key may have
		// left a claim behind (none was answered 202, 408 or 5xx, none
		// went unanswered, no instance died): held by no one.
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 8, 409, "busy")
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 20, tc.status, "busy since 10")
		// The last probe a second later: a refusal (429) that lasts.
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", sec+30, sec+40, tc.status, "busy since 30")
		e.x(1, "i2", history.PurposeFirst, "k2", "o2", "b2", 12, 14, 200, "A2") // the service answers others meanwhile
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
	if r := e.result(t, Liveness); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "a charge the provider failed") {
		t.Fatalf("a replayed saved error failed liveness: %+v", r)
	}
	// The same, the service having hung up before the provider answered
	// (its own deadline first): said so, not blamed on the provider.
	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 30, 500, "deadline exceeded")
	e.chargeOutcome("o", "i1", 10, 20, history.OutcomeHungUp)
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 40, 50, 500, "deadline exceeded")
	e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 60, 70, 500, "deadline exceeded")
	if r := e.result(t, Liveness); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "the service hung up on before the provider answered") {
		t.Fatalf("a replayed saved error after a hang-up: %+v", r)
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
	// The same 5xx, but each request called the provider again with the
	// order's downstream key (no effect): no saved error, the work run
	// again every time (a save that always fails). Said as such; it was
	// said to replay a saved error.
	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 30, 500, "save failed")
	e.chargeOutcome("o", "i1", 10, 29, history.OutcomeCharged)
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 40, 50, 500, "save failed")
	cs := append(e.l.Charges(), history.Charge{ID: "ch_1", Order: "o", Via: "i1", At: 42, End: 44, Outcome: history.OutcomeCharged, Effective: false, Client: -1})
	e.l = history.LedgerOf(cs)
	e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 60, 70, 500, "save failed")
	if r := e.result(t, Liveness); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "ran their work again on every request") {
		t.Fatalf("a 5xx with the work run again: %+v", r)
	}
}

// TestLivenessOrphans: a key still in flight after its request was at an
// instance when that instance was killed is not judged without a declared
// in-flight TTL (a correct service holds it until its TTL, unknown here),
// nor before the declared TTL ran out since the death, and the result
// says so; held past a declared TTL, or without a death, it is a
// violation.
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
	if !r.Pass || !strings.HasPrefix(r.Unjudged, "1 keys (first k: an instance died while one of its requests was there)") {
		t.Fatalf("an orphaned key without a declared TTL: %+v", r)
	}
	// Another instance died, or none: the request unanswered in the load
	// may have left its claim behind all the same (its handler failed
	// after the client gave up).
	for _, killed := range []string{"i2", ""} {
		if r := build(killed).result(t, Liveness); !r.Pass || !strings.HasPrefix(r.Unjudged, "1 keys (first k: a request of it went unanswered") {
			t.Errorf("a key held after a request of it went unanswered, %q killed: %+v", killed, r)
		}
	}
	// One whose connection was refused never reached the service: no
	// excuse.
	refused := newEv()
	refused.refused(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 6)
	refused.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 20, 409, "busy")
	refused.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 30, 40, 409, "busy")
	wantCause(t, refused.result(t, Liveness), CauseInFlight)
	// With a TTL declared, a key held after it (and its slack) ran out
	// since the death is stuck; one held before, as when a recheck
	// declares a TTL longer than the run's probes lasted, is not judged.
	r = build("i1").resultBy(t, Liveness, Policy{InFlightTTL: time.Second})
	if !r.Pass || !strings.Contains(r.Unjudged, "less than the declared in-flight TTL (1s") {
		t.Fatalf("a key held within the declared TTL of its owner's death: %+v", r)
	}
	late := build("i1")
	late.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 7+int64(time.Second+ttlSlack), 8+int64(time.Second+ttlSlack), 409, "busy")
	wantCause(t, late.resultBy(t, Liveness, Policy{InFlightTTL: time.Second}), CauseInFlight)

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
		e.x(1, "i2", history.PurposeFirst, "k2", "o2", "b2", 12, 14, 200, "A2") // the service answers others meanwhile
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i1", Start: 7, End: 9})
		for _, at := range []int64{10, int64(time.Second) + 30} {
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

// TestLivenessNoAnswer: a key whose last probes got no answer at all is
// stuck only if the service answered most of the other calls that ended
// while they were sent; beside a service answering no one, or a trickle
// (stopped, starved, cut off), it is not judged, and the result names it.
func TestLivenessNoAnswer(t *testing.T) {
	// others are the answers (status 0: none) of other keys' calls, each
	// ending between the key's first unanswered probe and its last.
	run := func(others ...int) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 0, 0, "")
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 0, 0, "")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 30, 0, 0, "")
		for i, st := range others {
			e.x(1, "i2", history.PurposeFirst, fmt.Sprintf("other%d", i), fmt.Sprintf("o%d", i), "b", int64(11+i), int64(12+i), st, "A")
		}
		return e.result(t, Liveness)
	}
	// {200, 200, 0}: a third of the others unanswered, so may the key's
	// one probe be (history.Ends.Beside).
	for _, others := range [][]int{nil, {0, 0}, {200, 0, 0}, {200, 0}, {200, 200, 0}} {
		r := run(others...)
		if !r.Pass || !strings.Contains(r.Unjudged, "1 keys (first k, 1 probes, the last: connection closed without an answer) got no answer") {
			t.Errorf("no answer beside others answered %v: %+v, want k not judged", others, r)
		}
	}
	r := run(200, 200, 200)
	wantCause(t, r, CauseNoAnswer)
	if !strings.Contains(r.Violations[0].Detail, "answered 3 of 3 other calls") {
		t.Errorf("detail %q, want the calls answered beside the key", r.Violations[0].Detail)
	}
	// An answer to the key itself ends its silence: only the probes after
	// it count, from the first one's call to the last one's error. One
	// probe unanswered is not judged, however the others fared (--settle
	// ran out on it).
	for _, tc := range []struct {
		otherEnd int64
		stuck    bool
	}{{14, false}, {35, true}} {
		e := newEv()
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 12, 409, "busy")
		e.x(1, "i2", history.PurposeFirst, "k2", "o2", "b", 13, tc.otherEnd, 200, "A")
		for a, call := range []int64{20, 30} {
			e.h.AddExchange(history.Exchange{Client: -1, Instance: "i2", Purpose: history.PurposeProbe, Key: "k", HasKey: true, Order: "o", Body: "b",
				Attempt: 2 + a, Call: call, Return: history.Never, Err: "timeout", ErrAt: call + 10})
		}
		if r := e.result(t, Liveness); r.Pass == tc.stuck || r.Unjudged != "" == tc.stuck {
			t.Errorf("a 409, then no answer twice, another key answered at %d: %+v, want stuck %v", tc.otherEnd, r, tc.stuck)
		}
	}
	e := newEv()
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 12, 409, "busy")
	e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 20, 0, 0, "")
	for i := range 40 {
		e.x(1, "i2", history.PurposeFirst, fmt.Sprintf("other%d", i), fmt.Sprintf("o%d", i), "b", 15, 20, 200, "A") // ended as the probe went unanswered
	}
	if r := e.result(t, Liveness); !r.Pass || !strings.Contains(r.Unjudged, "no answer to their one probe") {
		t.Errorf("a 409, then one probe unanswered beside 40 answered: %+v, want it not judged", r)
	}
}

// TestLivenessStillCharging: a key held (409) to its last probe while its
// order's charge was still being made at the provider, or while its
// downstream key was repeated there between its last two probes, has an
// owner still at work: not judged, naming --settle. A charge answered
// before the probes, and a repeat before the probe before the last, leave
// no such excuse.
func TestLivenessStillCharging(t *testing.T) {
	for _, tc := range []struct {
		end    int64 // when the provider answered the charge (0: not yet)
		stuck  bool
		repeat int64 // when a repeat of its downstream key came (0: none)
	}{{0, false, 0}, {35, false, 0}, {15, true, 0}, {15, false, 35}, {15, true, 25}} {
		e := newEv()
		// Refused in the load: the owner's own request is not in the
		// history (one that went unanswered, or got a 5xx, may have left
		// its claim behind: TestLivenessAfterAnError).
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 6, 409, "busy")
		e.chargeOutcome("o", "i1", 8, tc.end, history.OutcomeCharged)
		if tc.repeat > 0 {
			cs := e.l.Charges()
			e.l = history.LedgerOf(append(cs, history.Charge{ID: cs[0].ID, Order: "o", Key: "down", Via: "i2", At: tc.repeat, Client: -1}))
		}
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 20, 22, 409, "busy")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 30, 32, 409, "busy")
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 40, 42, 409, "busy")
		r := e.result(t, Liveness)
		if tc.stuck {
			wantCause(t, r, CauseInFlight)
			continue
		}
		if !r.Pass || !strings.Contains(r.Unjudged, "still making their order's charge") || !strings.Contains(r.Unjudged, "--settle") {
			t.Errorf("a key held while its charge (answered at %d, repeated at %d) was made: %+v, want it not judged", tc.end, tc.repeat, r)
		}
	}
}

// TestLivenessBesideALimiter: a key whose last probes a limiter refused
// (503, as nginx's limit_req answers) is not judged when the service
// refused so many of the other calls beside them; when it answered the
// others, the key's 503s are its own, and a key that succeeded before
// and now answers 503 is stuck.
func TestLivenessBesideALimiter(t *testing.T) {
	limited := func(othersAnswered bool) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 8, 200, "A")
		e.x(0, "i2", history.PurposeReplay, "k", "o", "b", 9, 10, 503, "rate limited")
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 100, 101, 503, "rate limited")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", int64(time.Second)+300, int64(time.Second)+301, 503, "rate limited")
		other := 503
		if othersAnswered {
			other = 200
		}
		for i := range 4 {
			k := fmt.Sprintf("k%d", i+2)
			e.x(-1, "i1", history.PurposeProbe, k, "o"+k, "b"+k, int64(110+40*i), int64(111+40*i), other, "rate limited")
		}
		return e.result(t, Liveness)
	}
	r := limited(false)
	if !r.Pass || !strings.Contains(r.Unjudged, "refused so many of the other calls") || !strings.Contains(r.Unjudged, "first k,") {
		t.Errorf("a key refused beside others refused: %+v, want it not judged", r)
	}
	wantCause(t, limited(true), CauseServerError)
}

// TestGatewayRefusalIsNoSavedError: a key that never got a success, whose
// last probes all got a gateway's 502 page while the gateway answered the
// other calls the same (nginx, after its upstreams failed, refuses every
// call until its fail_timeout passes), is not judged as refused beside
// the others, not as a replayed saved error: not even when the service
// declared that it saves its errors, since the page never came from it.
func TestGatewayRefusalIsNoSavedError(t *testing.T) {
	const page = "<html><head><title>502 Bad Gateway</title></head></html>"
	gateway := func(p Policy) Result {
		e := newEv()
		e.refused(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 8)
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 100, 101, 502, page)
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 300, 301, 502, page)
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 700, 701, 502, page)
		for i := range 4 {
			k := fmt.Sprintf("k%d", i+2)
			e.x(-1, "i1", history.PurposeProbe, k, "o"+k, "b"+k, int64(110+40*i), int64(111+40*i), 502, page)
		}
		return e.resultBy(t, Liveness, p)
	}
	// The same refusals beside a 502 the service saved for a charge the
	// provider failed (Express's example answers a failed charge 502):
	// the ledger explains it, a definite answer.
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 30, 502, `{"error":"payment failed"}`)
	e.chargeOutcome("o", "i1", 10, 20, history.OutcomeFailed)
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 100, 101, 502, `{"error":"payment failed"}`)
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 300, 301, 502, `{"error":"payment failed"}`)
	for i := range 4 {
		k := fmt.Sprintf("k%d", i+2)
		e.x(-1, "i1", history.PurposeProbe, k, "o"+k, "b"+k, int64(110+40*i), int64(111+40*i), 502, page)
	}
	if r := e.result(t, Liveness); !r.Pass || strings.Contains(r.Unjudged, "first k,") || len(r.Notes) != 1 {
		t.Errorf("a saved 502 for a failed charge, beside a gateway's refusals: %+v, want it settled", r)
	}
	for _, p := range []Policy{{}, {SavesErrors: true}} {
		r := gateway(p)
		if !r.Pass || !strings.Contains(r.Unjudged, "refused so many of the other calls") || !strings.Contains(r.Unjudged, "first k,") ||
			strings.Contains(r.Unjudged, "replay one 5xx") || len(r.Notes) > 0 {
			t.Errorf("saves errors %v: a key refused by a gateway beside the others: %+v, want it not judged as refused", p.SavesErrors, r)
		}
	}
}

// TestBriefRefusalIsNotJudged: a key whose probes end on one 503 (a busy
// service shedding load) when --settle runs out, the service answering
// the other calls beside it, was refused a moment, not shown stuck: not
// judged. The same refusal lasting a second is judged.
func TestBriefRefusalIsNotJudged(t *testing.T) {
	refused := func(lasted int64) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 0, 0, "")
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 100, 0, 0, "")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 200, 210, 503, "busy: 16 working")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 200+lasted, 210+lasted, 503, "busy: 17 working")
		e.x(1, "i2", history.PurposeProbe, "k2", "o2", "b2", 203, 205+lasted, 200, "A2") // answered beside it
		return e.result(t, Liveness)
	}
	if r := refused(0); !r.Pass || !strings.Contains(r.Unjudged, "less than the 1s it takes to tell a refusal that lasts") {
		t.Errorf("a key refused a moment when --settle ran out: %+v, want it not judged", r)
	}
	wantCause(t, refused(int64(time.Second)), CauseServerError)
}

// TestLivenessAfterAnError: a request answered 503 after its charge went
// through (the service's save failed) may have left its claim behind: a
// correct service that does not know its work's outcome keeps it until
// its lease ends, so a key held at the probes is not judged without a
// declared in-flight TTL, nor within it since the 503; held past it, it
// is stuck. A 202 says as little of the work's end; a later completed
// success of the key leaves no excuse.
func TestLivenessAfterAnError(t *testing.T) {
	sec := int64(time.Second)
	build := func(first int, lastProbe int64, completedAfter bool) *ev {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 12, first, "temporarily unavailable")
		e.charge("o", "i1", 8)
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 20, 21, 409, "busy")
		if completedAfter {
			e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 22, 23, 201, "charged")
			e.x(0, "i2", history.PurposeReplay, "k", "o", "b", 24, 25, 409, "busy")
		}
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 30, 31, 409, "busy")
		e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", lastProbe, lastProbe+1, 409, "busy")
		return e
	}
	r := build(503, sec+30, false).result(t, Liveness)
	if !r.Pass || !strings.HasPrefix(r.Unjudged, "1 keys (first k: a request of it was answered 503") {
		t.Errorf("a key held after a 503, no TTL declared: %+v, want it not judged", r)
	}
	r = build(202, sec+30, false).result(t, Liveness)
	if !r.Pass || !strings.HasPrefix(r.Unjudged, "1 keys (first k: a request of it was answered 202") {
		t.Errorf("a key held after a 202, no TTL declared: %+v, want it not judged", r)
	}
	ttl := Policy{InFlightTTL: time.Second}
	r = build(503, 12+int64(time.Second+ttlSlack)-1, false).resultBy(t, Liveness, ttl)
	if !r.Pass || !strings.Contains(r.Unjudged, "less than the declared in-flight TTL (1s") {
		t.Errorf("a key held within the declared TTL of its 503: %+v, want it not judged", r)
	}
	wantCause(t, build(503, 12+int64(time.Second+ttlSlack), false).resultBy(t, Liveness, ttl), CauseInFlight)
	wantCause(t, build(503, sec+30, true).result(t, Liveness), CauseInFlight)
}

// TestLivenessStarvedIsNotAnOrphan: a key whose request timed out in the
// load and whose last probes timed out too, while the service answered
// few of the other calls beside them, is not judged for the silence, not
// for want of an in-flight TTL (a starved service's undecided run asked
// for one, and declared, was undecided again); beside others answered,
// the timed-out request may have left its claim behind: the TTL is asked.
func TestLivenessStarvedIsNotAnOrphan(t *testing.T) {
	run := func(otherStatus int) Result {
		e := newEv()
		e.h.AddExchange(history.Exchange{Client: 0, Instance: "i1", Purpose: history.PurposeFirst, Key: "k", HasKey: true, Order: "o", Body: "b",
			Attempt: 1, Call: 5, Return: history.Never, Err: "timeout", ErrAt: 8})
		for a, call := range []int64{20, 30} {
			e.h.AddExchange(history.Exchange{Client: -1, Instance: "i2", Purpose: history.PurposeProbe, Key: "k", HasKey: true, Order: "o", Body: "b",
				Attempt: 1 + a, Call: call, Return: history.Never, Err: "timeout", ErrAt: call + 10})
		}
		for i := range 3 {
			e.x(1, "i2", history.PurposeFirst, fmt.Sprintf("other%d", i), fmt.Sprintf("o%d", i), "b", int64(21+i), int64(25+i), otherStatus, "A")
		}
		return e.result(t, Liveness)
	}
	if r := run(0); !r.Pass || !strings.Contains(r.Unjudged, "answered few or none of the other calls") || strings.Contains(r.Unjudged, "--inflight-ttl") {
		t.Errorf("starved: %+v, want it not judged for the silence", r)
	}
	if r := run(200); !r.Pass || !strings.Contains(r.Unjudged, "a request of it went unanswered (timeout)") || !strings.Contains(r.Unjudged, "--inflight-ttl") {
		t.Errorf("beside others answered: %+v, want it not judged for want of a TTL", r)
	}
}
