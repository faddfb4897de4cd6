package httpcheck

import (
	"fmt"
	"testing"

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

// charge records an effect at a given time by rebuilding the ledger.
func (e *ev) charge(order, via string, at int64) {
	cs := append(e.l.Charges(), history.Charge{ID: fmt.Sprintf("ch_%d", len(e.l.Charges())+1), Order: order, Via: via, At: at, Effective: true, Client: -1})
	e.l = history.LedgerOf(cs)
}

func (e *ev) result(t *testing.T, name string) Result {
	t.Helper()
	for _, r := range Run(Evidence{Hist: e.h, Ledger: e.l}) {
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
	t.Run("concurrent", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, ok1)
		e.x(1, "i2", history.PurposeRace, "k", "o", "b", 11, 52, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i1", 20)
		e.charge("o", "i2", 21)
		wantCause(t, e.result(t, AtMostOnce), CauseConcurrent)
	})
	t.Run("after done", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, ok1)
		e.charge("o", "i1", 20)
		e.x(0, "i2", history.PurposeReplay, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterDone)
	})
	t.Run("after error", func(t *testing.T) {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 500, "error")
		e.charge("o", "i1", 20)
		e.x(0, "i2", history.PurposeRetry, "k", "o", "b", 60, 90, 200, `{"charge":"ch_2"}`)
		e.charge("o", "i2", 70)
		wantCause(t, e.result(t, AtMostOnce), CauseAfterError)
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

func TestReplayStatusLiveness(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 60, 70, 200, "B")
	if r := e.result(t, Replay); r.Pass {
		t.Fatalf("a different answer after the first success passed: %+v", r)
	}

	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 200, "A")
	wantCause(t, e.result(t, Status), CauseReuse)

	e = newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 50, 200, "A")
	e.x(0, "i2", history.PurposeReuse, "k", "o2", "b2", 60, 70, 200, "C")
	wantCause(t, e.result(t, Status), CauseReuseRan)

	e = newEv()
	e.x(0, "i1", history.PurposeMissing, "", "o", "b", 10, 50, 200, "A")
	wantCause(t, e.result(t, Status), CauseMissing)

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

	e = newEv()
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 20, 409, "busy")
	if r := e.result(t, Liveness); r.Pass || !r.Applied {
		t.Fatalf("a key still in flight after healing passed: %+v", r)
	}
	e = newEv()
	e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 10, 20, 409, "busy")
	e.x(-1, "i2", history.PurposeProbe, "k", "o", "b", 30, 40, 200, "A")
	if r := e.result(t, Liveness); !r.Pass {
		t.Fatalf("%+v", r)
	}
}
