package httpcheck

import (
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
}
