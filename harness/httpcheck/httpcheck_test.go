package httpcheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// ev builds a history and ledger from exchanges, effects and faults.
type ev struct {
	h *history.History
	l *history.Ledger
}

func newEv() *ev { return &ev{history.New(), history.NewLedger()} }

func (e *ev) x(client int, inst, purpose, key, order, body string, call, ret int64, status int, reply string) {
	x := history.Exchange{Client: client, Instance: inst, Purpose: purpose, Key: key, HasKey: purpose != history.PurposeMissing,
		Order: order, Body: body, Attempt: 1, Call: call, Return: ret, Status: status, Reply: reply}
	if status == 0 {
		x.Return, x.Err = history.Never, "connection closed without an answer"
	}
	e.h.AddExchange(x)
}

// charge records an effect at a given time by rebuilding the ledger; the
// provider answered it at at+1 with the charge id.
func (e *ev) charge(order, via string, at int64) {
	e.chargeOutcome(order, via, at, at+1, history.OutcomeCharged)
}

// chargeOutcome records an effect the provider answered at end with
// outcome.
func (e *ev) chargeOutcome(order, via string, at, end int64, outcome string) {
	cs := append(e.l.Charges(), history.Charge{ID: fmt.Sprintf("ch_%d", len(e.l.Charges())+1), Order: order, Via: via, At: at,
		End: end, Outcome: outcome, Effective: true, Client: -1})
	e.l = history.LedgerOf(cs)
}

// refused records an attempt whose connection was refused at ret.
func (e *ev) refused(client int, inst, purpose, key, order, body string, call, ret int64) {
	e.h.AddExchange(history.Exchange{Client: client, Instance: inst, Purpose: purpose, Key: key, HasKey: true, Order: order, Body: body,
		Attempt: 1, Call: call, Return: history.Never, Err: "connection refused", ErrAt: ret})
}

func (e *ev) result(t *testing.T, name string) Result {
	t.Helper()
	return e.resultBy(t, name, Policy{})
}

// resultBy is result under the policy p the service declared.
func (e *ev) resultBy(t *testing.T, name string, p Policy) Result {
	t.Helper()
	for _, r := range Run(Evidence{Hist: e.h, Ledger: e.l, Policy: p}) {
		if r.Checker == name {
			return r
		}
	}
	t.Fatalf("no checker %s", name)
	return Result{}
}

func wantCause(t *testing.T, r Result, cause string) {
	t.Helper()
	if r.Pass || len(r.Causes()) != 1 || r.Causes()[0] != cause {
		t.Fatalf("%s: pass=%v causes %v, want a failure caused %s (%s)", r.Checker, r.Pass, r.Causes(), cause, r.Detail)
	}
}

func TestAtMostOnceCauses(t *testing.T) {
	const ok1 = `{"charge":"ch_1"}`
	t.Run("one charge passes", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, ok1)
		e.charge("o", "i1", 20)
		e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 60, 70, 200, ok1)
		if r := e.result(t, AtMostOnce); !r.Pass || !r.Applied {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("concurrent at the provider", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, ok1)
		e.x(1, "i2", history.PurposeRace, "k", "o", "b", 11, 52, 200, `{"charge":"ch_2"}`)
		e.chargeOutcome("o", "i1", 20, 40, history.OutcomeCharged)
		e.chargeOutcome("o", "i2", 21, 41, history.OutcomeCharged)
		wantCause(t, e.result(t, AtMostOnce), CauseConcurrent)
	})
	t.Run("concurrent: the first request still open", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 80, 200, ok1)
		e.charge("o", "i1", 20)
		e.x(1, "i2", history.PurposeRace, "k", "o", "b", 30, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 40)
		wantCause(t, e.result(t, AtMostOnce), CauseConcurrent)
	})
	t.Run("after done", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, ok1)
		e.charge("o", "i1", 20)
		e.x(0, "i2", history.PurposeReplay, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		r := e.result(t, AtMostOnce)
		wantCause(t, r, CauseAfterDone)
		if strings.Contains(r.Violations[0].Detail, "or a race") {
			t.Errorf("a request sent after the first was answered is said to race: %s", r.Violations[0].Detail)
		}
	})
	t.Run("after done, the second's request open from before the first charge", func(t *testing.T) {
		// A check-then-insert race across instances: the race request
		// on i2 was sent with the first, checked before i1's claim, and
		// charged once i1 had answered. Said as a race too, not only as
		// a forgotten key.
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, ok1)
		e.charge("o", "i1", 20)
		e.x(1, "i2", history.PurposeRace, "k", "o", "b", 10, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		r := e.result(t, AtMostOnce)
		wantCause(t, r, CauseAfterDone)
		if !strings.Contains(r.Violations[0].Detail, "or a race: client 1's request on i2") {
			t.Errorf("the overlapping request is not named: %s", r.Violations[0].Detail)
		}
	})
	t.Run("after an error, the second's request open from before the first charge", func(t *testing.T) {
		// A check-then-insert race across instances whose first charge
		// the provider failed: said to be a release on error alone,
		// though the service never released; the race is said too.
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 502, "error")
		e.chargeOutcome("o", "i1", 20, 30, history.OutcomeFailed)
		e.x(1, "i2", history.PurposeRace, "k", "o", "b", 10, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		r := e.result(t, AtMostOnce)
		wantCause(t, r, CauseAfterError)
		if !strings.Contains(r.Violations[0].Detail, "or a race: client 1's request on i2") {
			t.Errorf("the overlapping request is not named: %s", r.Violations[0].Detail)
		}
	})
	t.Run("after error a client saw", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 500, "error")
		e.charge("o", "i1", 20)
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterError)
	})
	// Was after-done (or concurrent): the 5xx reply was lost, but the
	// provider's ledger says it failed the first charge.
	t.Run("after error whose 5xx was lost", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultNetLostReply, Failpoint: "i1", Start: 5, End: 60})
		e.chargeOutcome("o", "i1", 20, 30, history.OutcomeFailed)
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterError)
	})
	t.Run("after error: the service hung up", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 45, 500, "deadline")
		e.chargeOutcome("o", "i1", 20, 40, history.OutcomeHungUp)
		e.x(0, "i1", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i1", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterError)
	})
	// The provider saw a hang-up because the instance died (killed from
	// outside, exited by itself): said so, not a deadline of the
	// service's and a release after an error.
	t.Run("after error: the instance exited as it was charging", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		e.chargeOutcome("o", "i1", 20, 40, history.OutcomeHungUp)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceExit, Failpoint: "i1", Start: 41, End: 50})
		e.x(0, "i1", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i1", 70)
		r := e.result(t, AtMostOnce)
		wantCause(t, r, CauseAfterCrash)
		if !strings.Contains(r.Detail, "i1, which made ch_1, exited by itself at") || strings.Contains(r.Detail, "its own deadline") {
			t.Errorf("detail: %s", r.Detail)
		}
	})
	// Was concurrent: an attempt refused while its instance was down
	// counted as open forever.
	t.Run("a refused attempt is closed", func(t *testing.T) {
		e := newEv()
		e.refused(0, "i1", history.PurposeFirst, "k", "o", "b", 4, 5)
		e.x(0, "i1", history.PurposeRetry, "k", "o", "b", 10, 50, 200, ok1)
		e.charge("o", "i1", 20)
		e.x(1, "i1", history.PurposeReplay, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i1", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterDone)
	})
	// A request whose reply was lost, its instance killed later: the
	// kill ended it, so a charge after the restart is a key forgotten,
	// not two executions at once (it stayed open for ever).
	t.Run("a kill ends a request whose reply was lost", func(t *testing.T) {
		e := newEv()
		ms := int64(time.Millisecond) // the kill comes long after the client gave up
		h := history.Exchange{Client: 2, Instance: "i1", Purpose: history.PurposeFirst, Key: "k", HasKey: true, Order: "o", Body: "b",
			Attempt: 1, Call: 10 * ms, Return: history.Never, Err: "connection closed without an answer", ErrAt: 15 * ms}
		e.h.AddExchange(h)
		e.charge("o", "i1", 11*ms)
		e.x(2, "i1", history.PurposeRetry, "k", "o", "b", 30*ms, 40*ms, 200, ok1)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i1", Start: 800 * ms, End: 900 * ms})
		e.x(3, "i1", history.PurposeReplay, "k", "o", "b", 3000*ms, 3100*ms, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i1", 3050*ms)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterDone)
	})
	t.Run("a kill between unseen charges is excused", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		e.charge("o", "i1", 20)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i1", Start: 30, End: 40})
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		if r := e.result(t, AtMostOnce); !r.Pass || len(r.Notes) != 1 {
			t.Fatalf("%+v", r)
		}
	})
	// Was excused: the service answers with its own payment id, so no
	// reply names ch_1; but a client got a success before the kill, so the
	// service had saved (or should have saved) the key and forgot it.
	t.Run("own payment id, keys forgotten on restart", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 25, 201, `{"payment":"pay_1"}`)
		e.charge("o", "i1", 20)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i1", Start: 30, End: 40})
		e.x(1, "i1", history.PurposeReplay, "k", "o", "b", 60, 90, 201, `{"payment":"pay_2"}`)
		e.charge("o", "i1", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterDone)
		if r := e.result(t, Replay); len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "charge id") {
			t.Errorf("no note that the answers never carry the charge id: %+v", r)
		}
	})
	t.Run("an exit by itself excuses nothing", func(t *testing.T) {
		e := newEv()
		e.h.AddExchange(history.Exchange{Client: 0, Instance: "i1", Purpose: history.PurposeFirst, Key: "k", HasKey: true, Order: "o", Body: "b",
			Call: 10, Return: history.Never, Err: "connection closed without an answer", ErrAt: 31})
		e.charge("o", "i1", 20)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceExit, Failpoint: "i1", Start: 30, End: 40})
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		r := e.result(t, AtMostOnce)
		wantCause(t, r, CauseAfterDone)
		if len(r.Notes) != 0 {
			t.Errorf("an exit by itself was excused: %v", r.Notes)
		}
	})
	t.Run("a reset by a dying instance closes the attempt", func(t *testing.T) {
		e := newEv()
		e.h.AddExchange(history.Exchange{Client: 0, Instance: "i1", Purpose: history.PurposeFirst, Key: "k", HasKey: true, Order: "o", Body: "b",
			Call: 10, Return: history.Never, Err: "connection closed without an answer", ErrAt: 31})
		e.chargeOutcome("o", "i1", 20, 25, history.OutcomeFailed)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceExit, Failpoint: "i1", Start: 30, End: 40})
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterError)
	})
	// Was concurrent: a request that timed out while its instance crashed
	// counted as open forever.
	t.Run("a timeout across a crash is closed", func(t *testing.T) {
		e := newEv()
		e.h.AddExchange(history.Exchange{Client: 0, Instance: "i1", Purpose: history.PurposeFirst, Key: "k", HasKey: true, Order: "o", Body: "b",
			Call: 10, Return: history.Never, Err: "timeout", ErrAt: 3010})
		e.charge("o", "i1", 20)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceExit, Failpoint: "i1", Start: 30, End: 900})
		e.x(0, "i1", history.PurposeRetry, "k", "o", "b", 1000, 1090, 200, `{"id":"p2"}`)
		e.charge("o", "i1", 1070)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterDone)
	})
	t.Run("a kill of another instance excuses nothing", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		e.charge("o", "i1", 20)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i3", Start: 30, End: 40})
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseConcurrent)
	})
}

func TestReplay(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 60, 70, 200, "B")
	if r := e.result(t, Replay); r.Pass {
		t.Fatalf("a different answer after the first success passed: %+v", r)
	}
}

// TestRefusedSaysWhatToDeclare: a run nothing of which was tested names
// the flag the refusal points at: a 404 the path (not the key's header),
// a 401 a credential, a 400 the key or the body.
func TestRefusedSaysWhatToDeclare(t *testing.T) {
	for code, want := range map[int]string{404: "--path", 405: "--method", 401: "Authorization", 415: "--body-type", 400: "--key-header"} {
		e := newEv()
		for i := 0; i < 20; i++ {
			k := fmt.Sprintf("k%d", i)
			e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), code, "no")
		}
		r := e.result(t, Answers)
		wantCause(t, r, CauseNothingTested)
		if d := r.Violations[0].Detail; !strings.Contains(d, want) {
			t.Errorf("all answered %d: %q does not name %s", code, d, want)
		}
	}
}

// TestAnswers: a service that answers 500 to every keyed request fails
// first, saying so; one that mostly succeeds passes.
func TestAnswers(t *testing.T) {
	e := newEv()
	for i := 0; i < 50; i++ {
		k := fmt.Sprintf("k%d", i)
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 500, "invalid key")
	}
	e.x(0, "i1", history.PurposeFirst, "ok", "ook", "b", 600, 605, 200, "fine")
	rs := Run(Evidence{Hist: e.h, Ledger: e.l})
	if rs[0].Checker != Answers {
		t.Fatalf("the first verdict is %s, want %s", rs[0].Checker, Answers)
	}
	wantCause(t, rs[0], CauseNothingTested)
	if !strings.Contains(rs[0].Detail, "answered 500 to 98% of keyed requests") || !strings.Contains(rs[0].Detail, "nothing was tested") {
		t.Errorf("detail %q", rs[0].Detail)
	}
	e = newEv()
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("k%d", i)
		st := 200
		if i < 3 {
			st = 500
		}
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), st, "x")
	}
	for i := 3; i < 10; i++ {
		e.charge(fmt.Sprintf("ok%d", i), "i1", int64(10*i+2))
	}
	if r := e.result(t, Answers); !r.Pass || !r.Applied {
		t.Fatalf("%+v", r)
	}

	// A limiter that refused some keys every time: they were not tested,
	// and are counted apart; the others were judged. Refusing most keys,
	// it left too little tested.
	limited := func(through int) Result {
		e := newEv()
		for i := 0; i < 10; i++ {
			k := fmt.Sprintf("k%d", i)
			if i < through {
				e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 200, "x")
				e.charge("o"+k, "i1", int64(10*i+2))
				continue
			}
			e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+1), 429, "slow down")
			e.x(0, "i2", history.PurposeRetry, k, "o"+k, "b", int64(10*i+2), int64(10*i+3), 503, "rate limited")
		}
		return e.result(t, Answers)
	}
	if r := limited(7); !r.Pass || !strings.Contains(r.Detail, "7 of 10 keys got a success") || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "not tested: 3 keys") {
		t.Errorf("a limiter that refused 3 keys of 10: %+v", r)
	}
	// Refusing most keys, it left too little tested: not judged (no fault
	// of the keys), and said as nothing tested.
	if r := limited(3); !r.Pass || !strings.Contains(r.Unjudged, "and 7 of 10 keys never got a success") ||
		NothingTested([]Result{r}, false) != r.Unjudged || NothingTested([]Result{r}, true) != "" {
		t.Errorf("a limiter that let 3 keys of 10 through: %+v", r)
	}

	// Successes, but no charge of an order idemcheck sent.
	e = newEv()
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("k%d", i)
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 200, "ok")
	}
	r := e.result(t, Answers)
	wantCause(t, r, CauseNothingTested)
	if !strings.Contains(r.Detail, "never called it") {
		t.Errorf("detail %q", r.Detail)
	}
	e.charge("their-own-id", "i1", 3)
	if r := e.result(t, Answers); r.Pass || !strings.Contains(r.Detail, "none of an order idemcheck sent") {
		t.Errorf("charges of unknown orders passed: %+v", r)
	}

	// A provider that fails most charges (--provider-fail 0.9): most keys
	// answer their saved 500, each after its charge went through; they
	// were tested.
	e = newEv()
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("k%d", i)
		st, outcome := 500, history.OutcomeFailed
		if i == 0 {
			st, outcome = 200, history.OutcomeCharged
		}
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), st, "x")
		e.chargeOutcome("o"+k, "i1", int64(10*i+1), int64(10*i+2), outcome)
	}
	if r := e.result(t, Answers); !r.Pass || !strings.Contains(r.Detail, "9 more an error after the provider charged") || len(r.Notes) != 0 {
		t.Errorf("saved errors of failed charges counted as nothing tested: %+v", r)
	}
	// The same, but no request of the charged keys got any answer (a
	// service that answers nothing within --timeout): said apart from
	// an error answered.
	e = newEv()
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("k%d", i)
		if i == 0 {
			e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 200, "x")
		} else {
			e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), 0, 0, "")
		}
		e.chargeOutcome("o"+k, "i1", int64(10*i+1), int64(10*i+2), history.OutcomeCharged)
	}
	if r := e.result(t, Answers); !strings.Contains(r.Detail, "1 of 10 keys got a success, 9 more no answer at all") || strings.Contains(r.Detail, "an error after") {
		t.Errorf("unanswered charged keys said to have got an error: %+v", r)
	}
	// Every key only an error after its charge: tested, and the note says
	// what a run without a success leaves out.
	e = newEv()
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("k%d", i)
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 500, "x")
		e.chargeOutcome("o"+k, "i1", int64(10*i+1), int64(10*i+2), history.OutcomeFailed)
	}
	if r := e.result(t, Answers); !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "no key got a success") {
		t.Errorf("a run with no success: %+v", r)
	}

	// A service that saves every error (a circuit breaker refusing most
	// charges before the provider): keys that replay one 5xx were tested
	// when it declares --saves-errors, not otherwise.
	answers := func(p Policy) Result {
		e := newEv()
		for i := 0; i < 10; i++ {
			k := fmt.Sprintf("k%d", i)
			if i < 3 {
				e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(100*i), int64(100*i+5), 200, "ok")
				e.charge("o"+k, "i1", int64(100*i+1))
				continue
			}
			e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(100*i), int64(100*i+5), 502, "breaker open")
			e.x(0, "i2", history.PurposeRetry, k, "o"+k, "b", int64(100*i+10), int64(100*i+15), 502, "breaker open")
		}
		return e.resultBy(t, Answers, p)
	}
	if r := answers(Policy{}); !r.Pass || !strings.Contains(r.Unjudged, "nothing was tested") {
		t.Errorf("a breaker refusing most keys, undeclared: %+v, want nothing tested, not judged", r)
	}
	if r := answers(Policy{SavesErrors: true}); !r.Pass || !strings.Contains(r.Detail, "7 more replayed a saved 5xx") {
		t.Errorf("declared saved errors counted as nothing tested: %+v", r)
	}
}

// TestInterrupted: an interrupted run's liveness and failed answers say
// they were not judged, with no violation text left from the judging
// that was cut short; the other checkers keep their verdicts.
func TestInterrupted(t *testing.T) {
	rs := Interrupted([]Result{
		{Checker: Answers, Applied: true, Detail: "1 violation(s); first: nothing", Violations: []Violation{{Checker: Answers, Cause: CauseNothingTested}}},
		{Checker: AtMostOnce, Applied: true, Detail: "1 violation(s); first: twice", Violations: []Violation{{Checker: AtMostOnce, Cause: CauseConcurrent}}},
		{Checker: Liveness, Applied: true, Detail: "3 violation(s); first: key k still got 409", Violations: []Violation{{Checker: Liveness, Cause: CauseInFlight}}},
	}, "during the final probes")
	for _, r := range []Result{rs[0], rs[2]} {
		if !r.Pass || len(r.Violations) != 0 || !strings.HasPrefix(r.Detail, "not judged: the run was interrupted during the final probes") || r.Unjudged == "" {
			t.Errorf("%s: %+v", r.Checker, r)
		}
	}
	if rs[1].Pass || len(rs[1].Violations) != 1 {
		t.Errorf("a recorded violation was dropped: %+v", rs[1])
	}
}

// TestReplayComparesJSONAsValues: a replay whose JSON body holds the same
// value in another order (a store keeping it as Postgres jsonb) is the
// same answer; another value is not. A 202 Accepted is not the answer a
// replay must equal: an asynchronous service answers it until the work is
// done, then its result.
func TestReplayComparesJSONAsValues(t *testing.T) {
	replay := func(first, again string, firstStatus int) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 20, firstStatus, first)
		e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 30, 40, 200, again)
		e.x(2, "i1", history.PurposeReplay, "k", "o", "b", 50, 60, 200, again)
		return e.result(t, Replay)
	}
	if r := replay(`{"amount":5,"charge":"ch_1"}`, `{"charge": "ch_1", "amount": 5}`, 200); !r.Pass {
		t.Errorf("the same JSON value in another order: %+v", r)
	}
	if r := replay(`{"amount":100,"fee":0.5,"lines":[1]}`, `{"lines":[1.0],"fee":5e-1,"amount":1e2}`, 200); !r.Pass {
		t.Errorf("the same numbers written another way: %+v", r)
	}
	if r := replay(`{"amount":100}`, `{"amount":100.5}`, 200); r.Pass {
		t.Errorf("another number passed: %+v", r)
	}
	if r := replay(`{"amount":5,"charge":"ch_1"}`, `{"amount":5,"charge":"ch_2"}`, 200); r.Pass {
		t.Errorf("another JSON value passed: %+v", r)
	}
	if r := replay(`{"status":"queued"}`, `{"amount":5,"charge":"ch_1"}`, 202); !r.Pass {
		t.Errorf("a result after a 202 compared with the 202: %+v", r)
	}
}

// TestAtMostOnceAcceptedIsNoOutcome: a 202 Accepted between two charges
// of an order, around a kill of the first's instance, says the work was
// queued, not done: the second charge is still the at-least-once of a
// crash, excused. A 200 carrying the outcome is not.
func TestAtMostOnceAcceptedIsNoOutcome(t *testing.T) {
	for _, tc := range []struct {
		status int
		pass   bool
	}{{202, true}, {200, false}} {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 0, 0, "")
		e.charge("o", "i1", 20)
		e.h.AddFault(history.Fault{Client: -1, Kind: history.FaultInstanceKill, Failpoint: "i1", Start: 25, End: 300})
		e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 100, 120, tc.status, `{"charge":"ch_1"}`)
		e.charge("o", "i2", 400)
		if r := e.result(t, AtMostOnce); r.Pass != tc.pass {
			t.Errorf("a %d between the charges: pass %v, want %v (%+v)", tc.status, r.Pass, tc.pass, r)
		}
	}
}

// TestUnreached: a run in which nothing was tested and the provider saw
// no charge of a sent order (a catch-all page answered every path) has
// its replay-fidelity and status-codes unjudged, not failed with causes
// of a service never reached; once the provider saw a charge, they judge.
func TestUnreached(t *testing.T) {
	e := newEv()
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("k%d", i)
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 200, "a catch-all page")
		e.x(1, "i2", history.PurposeReuse, k, "r"+k, "b2", int64(10*i+6), int64(10*i+8), 200, "a catch-all page")
	}
	ev := Evidence{Hist: e.h, Ledger: e.l}
	for _, r := range Unreached(Run(ev), ev, false) {
		switch r.Checker {
		case Answers:
			wantCause(t, r, CauseNothingTested)
		case Replay, Status:
			if !r.Pass || !strings.Contains(r.Unjudged, "the service ran none of them") {
				t.Errorf("%s judged answers that never reached the service: %+v", r.Checker, r)
			}
		}
	}
	e.charge("ok0", "i1", 2)
	ev = Evidence{Hist: e.h, Ledger: e.l}
	for _, r := range Unreached(Run(ev), ev, false) {
		if r.Checker == Status && (r.Pass || r.Unjudged != "") {
			t.Errorf("status-codes did not judge once the provider saw a charge: %+v", r)
		}
	}
}
