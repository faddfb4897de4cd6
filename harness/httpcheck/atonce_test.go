package httpcheck

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestChargedAtOnceIsNoted: i2 called the provider for an order while
// i1's charge of it was still being made, and only the order's
// downstream key made the second call of no effect: two executions of
// one key at once (a lock in one instance's memory), which a run passed
// saying nothing. The note says it; a call of no effect by the same
// instance, or once the first charge was answered, is no such thing.
func TestChargedAtOnceIsNoted(t *testing.T) {
	run := func(via string, at int64) Result { return atOnce(t, "i1", via, at) }
	r := run("i2", 20*msec)
	if !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "1 orders were called for by two instances at once") || !strings.Contains(r.Notes[0], "i2 called the provider for it at 20.0ms") {
		t.Fatalf("a second instance's call while the first charge was made: %+v, want it noted", r)
	}
	for _, c := range []struct {
		via string
		at  int64
	}{{"i1", 20 * msec}, {"i2", 55 * msec}} {
		if r := run(c.via, c.at); !r.Pass || len(r.Notes) != 0 {
			t.Errorf("a call of no effect by %s at %v: %+v, want no note", c.via, c.at, r)
		}
	}
}

// TestChargedAtOnceUntold: instances a user started behind a proxy call
// /charge, so the ledger cannot say which made a call. A lock in each
// one's memory then passed saying nothing; the note says the overlap,
// and that two executions were not told apart from one request's retry.
func TestChargedAtOnceUntold(t *testing.T) {
	r := atOnce(t, "", "", 20*msec)
	if !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "1 orders were called for again while their charge was being made") ||
		!strings.Contains(r.Notes[0], "were not told apart") {
		t.Fatalf("an unattributed call while the first charge was made: %+v, want it noted, saying what was not told apart", r)
	}
	if r := atOnce(t, "", "", 55*msec); !r.Pass || len(r.Notes) != 0 {
		t.Errorf("an unattributed call once the charge was answered: %+v, want no note", r)
	}
}

// atOnce is at-most-once's result on a key whose order instance first
// charged from 10 to 50 ms, and instance via called for again at at, of
// no effect.
func atOnce(t *testing.T, first, via string, at int64) Result {
	t.Helper()
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5*msec, 60*msec, 201, `{"charge":"ch_1"}`)
	e.x(1, "i2", history.PurposeRace, "k", "o", "b", 6*msec, 61*msec, 502, "provider answered 409")
	e.l = history.LedgerOf([]history.Charge{
		{ID: "ch_1", Order: "o", Key: "charge:k", Via: first, At: 10 * msec, End: 50 * msec, Outcome: history.OutcomeCharged, Effective: true, Client: -1},
		{ID: "ch_1", Order: "o", Key: "charge:k", Via: via, At: at, End: at + msec, Outcome: history.OutcomeCharged, Client: -1},
	})
	return e.result(t, AtMostOnce)
}
