package check_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
)

// beginErr records a Begin by client, called at call, whose error came
// back at errAt with its outcome unknown, inside the call's deadline (an
// error the store answered, or a dropped connection).
func (r *rec) beginErr(client int, fp string, call, errAt int64) {
	r.beginUnanswered(client, fp, call, errAt, false)
}

// beginTimedOut records a Begin by client, called at call, that timed out
// at errAt: its error came once the call's own deadline had passed
// (history.Op.Deadline).
func (r *rec) beginTimedOut(client int, fp string, call, errAt int64) {
	r.beginUnanswered(client, fp, call, errAt, true)
}

// beginUnanswered is beginErr, or beginTimedOut if deadline.
func (r *rec) beginUnanswered(client int, fp string, call, errAt int64, deadline bool) {
	r.id++
	in := models.Input{Kind: models.Begin, Key: key, Fingerprint: fp, ID: r.id, Now: t0.Add(time.Duration(call * ms))}
	r.h.AddOp(history.Op{Client: client, Input: in, Output: models.Output{Unknown: true}, Call: call * ms, Return: never,
		ErrAt: errAt * ms, Err: "an error", Deadline: deadline})
}

// availabilityOf runs every checker on e and returns the availability
// checker's result.
func availabilityOf(t *testing.T, e check.Evidence) check.Result {
	t.Helper()
	for _, c := range check.Run(e) {
		if c.Checker == check.Availability {
			return c
		}
	}
	t.Fatal("no availability checker")
	return check.Result{}
}

// strictAvailability is the availability result of r in strict mode.
func strictAvailability(t *testing.T, r *rec) check.Result {
	t.Helper()
	return availabilityOf(t, check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: 10 * time.Second, StrictAvailability: true})
}

// TestAvailability: an error where the decision table says 409 (the key
// certainly in flight under a live claim of the same parameters, no fault
// near) is counted; past the tolerance it is a finding, never a failure;
// errors where 409 was not certain, or near a fault, are not counted.
func TestAvailability(t *testing.T) {
	judge := func(r *rec) check.Result { return r.judge(t, check.Availability) }
	t.Run("race losers answered with declared no-ops: a finding", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		for i := range 10 {
			r.beginNotApplied(10+i, "fp", int64(2+i), int64(3+i))
		}
		r.begin(2, "fp", 20, 21, inFlightD)
		got := judge(r)
		if got.Verdict != check.Pass || got.Judged != 11 || !strings.Contains(got.Detail, "finding: 10 of 11") || !strings.Contains(got.Detail, "10 declared not applied") {
			t.Fatalf("%s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
		}
	})
	t.Run("a timeout inside the lease counts; one after the save was sent, after the lease, or during a fault does not", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.beginErr(2, "fp", 10, 30)  // counted
		r.beginErr(3, "fp", 40, 120) // past the lease (LockTTL 100 ms)
		r.h.AddFault(history.Fault{Client: -1, Kind: history.FaultServerPause, Start: 45 * ms, End: 50 * ms})
		r.beginErr(4, "fp", 44, 46)    // during a server pause
		r.beginErr(5, "other", 50, 52) // other parameters: 422 due, not 409
		r.complete(1, "a", resp, 60, 61, false, false)
		r.beginErr(6, "fp", 55, 62) // the save may have landed first
		got := judge(r)
		if got.Judged != 1 || !strings.Contains(got.Detail, "finding: 1 of 1") || !strings.Contains(got.Detail, "0 declared not applied, 1 of unknown outcome") {
			t.Fatalf("%s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
		}
	})
	t.Run("a loser racing the claim counts; an error before the claim was sent does not", func(t *testing.T) {
		r := newRec()
		r.beginErr(2, "fp", 0, 1) // nothing to meet yet: a claim was due
		r.begin(1, "fp", 2, 9, claimedD("a", false))
		r.beginNotApplied(3, "fp", 3, 5) // raced the claim and lost
		got := judge(r)
		if got.Judged != 1 || !strings.Contains(got.Detail, "finding: 1 of 1") || !strings.Contains(got.Detail, "1 declared not applied") {
			t.Fatalf("%s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
		}
	})
	t.Run("409s all during a fault are said not judged, not that none met a claim", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.h.AddFault(history.Fault{Client: -1, Kind: history.FaultServerPause, Start: 5 * ms, End: 90 * ms})
		for i := range 5 {
			r.begin(2, "fp", int64(10+i), int64(11+i), inFlightD)
		}
		got := judge(r)
		if got.Verdict != check.Pass || got.Judged != 0 || !strings.Contains(got.Detail, "not judged: the 5 Begins that met a live claim") {
			t.Fatalf("%s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
		}
	})
	t.Run("one error in many 409s is within the tolerance", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		for i := range 90 {
			r.begin(2, "fp", int64(2+i), int64(2+i), inFlightD)
			r.begin(3, "fp", int64(2+i), int64(2+i), inFlightD)
		}
		r.beginErr(4, "fp", 5, 6)
		got := judge(r)
		if got.Verdict != check.Pass || got.Judged != 181 || strings.Contains(got.Detail, "finding") {
			t.Fatalf("%s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
		}
	})
}

// TestStrictAvailability: asked (Evidence.StrictAvailability, what
// `idemcheck mutate` and --strict-availability ask), a store past the
// tolerance fails, with a violation on the first key that erred; within
// it, strictness changes nothing.
func TestStrictAvailability(t *testing.T) {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	for i := range 4 {
		r.beginNotApplied(10+i, "fp", int64(2+i), int64(3+i))
	}
	got := strictAvailability(t, r)
	if got.Verdict != check.Fail || len(got.Violations) != 1 || got.Violations[0].Key != key.String() || !strings.Contains(got.Detail, "4 of 4") {
		t.Fatalf("%s %v: %s", got.Verdict, got.Violations, got.Detail)
	}
	r = newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.begin(2, "fp", 2, 3, inFlightD)
	if got := strictAvailability(t, r); got.Verdict != check.Pass || len(got.Violations) != 0 {
		t.Fatalf("%s %v: %s", got.Verdict, got.Violations, got.Detail)
	}
}

// TestAvailabilityPatience: another client's short pause (a process held
// inside its transaction, holding the lock) does not excuse an error the
// store gave instead of waiting; a pause past check.AvailabilityPatience,
// or a server's pause, does.
func TestAvailabilityPatience(t *testing.T) {
	long := model
	long.LockTTL = time.Hour
	judge := func(r *rec) check.Result {
		return availabilityOf(t, check.Evidence{Hist: r.h, Ledger: r.l, Model: long, ProbeClient: probe, LinTimeout: 10 * time.Second})
	}
	patience := int64(check.AvailabilityPatience / time.Millisecond)
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.h.AddFault(history.Fault{Client: 1, Kind: history.FaultPause, Failpoint: "sqlite.begin-before-commit", Start: 2 * ms, End: 27 * ms})
	r.beginErr(2, "fp", 3, 4)
	if got := judge(r); got.Judged != 1 || !strings.Contains(got.Detail, "finding: 1 of 1") {
		t.Fatalf("short client pause: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
	r = newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.h.AddFault(history.Fault{Client: 1, Kind: history.FaultPause, Failpoint: "sqlite.begin-before-commit", Start: 2 * ms, End: (3 + patience) * ms})
	r.beginErr(2, "fp", 1+patience, 3+patience) // past the patience, inside the pause
	r.h.AddFault(history.Fault{Client: -1, Kind: history.FaultServerPause, Start: (5 + patience) * ms, End: (6 + patience) * ms})
	r.beginErr(3, "fp", 4+patience, 6+patience) // a server pause excuses at once
	r.beginErr(4, "fp", 8+patience, 9+patience) // counted
	if got := judge(r); got.Judged != 1 || !strings.Contains(got.Detail, "finding: 1 of 1") {
		t.Fatalf("long client pause, server pause: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
}

// TestAvailabilityTimeouts: a Begin owed a 409 whose error came once its
// own deadline had passed (the client gave up: history.Op.Deadline) is
// slowness, not an error the store answered: counted apart, never a
// finding nor, in strict mode, a failure; the store's answered errors
// beside them still are.
func TestAvailabilityTimeouts(t *testing.T) {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	for i := range 8 {
		r.beginTimedOut(10+i, "fp", int64(2+i), int64(32+i))
	}
	r.begin(2, "fp", 20, 21, inFlightD)
	if got := strictAvailability(t, r); got.Verdict != check.Pass || got.Judged != 9 || strings.Contains(got.Detail, "finding") ||
		!strings.Contains(got.Detail, "0 got an error") || !strings.Contains(got.Detail, "8 of them timed out") {
		t.Fatalf("timeouts alone: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
	// Declared not applied, past the deadline (no pool session came free
	// in time): timed out as well.
	for i := range 4 {
		r.id++
		in := models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp", ID: r.id, Now: t0.Add(time.Duration(int64(12+i) * ms))}
		r.h.AddOp(history.Op{Client: 30 + i, Input: in, Output: models.Output{NotApplied: true}, Call: int64(12+i) * ms, Return: int64(42+i) * ms,
			Err: "not applied: no session came free: context deadline exceeded (the call's deadline passed)", Deadline: true})
	}
	if got := strictAvailability(t, r); got.Verdict != check.Pass || !strings.Contains(got.Detail, "12 of them timed out") {
		t.Fatalf("timeouts, some declared not applied: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
	r.beginErr(3, "fp", 22, 23) // an error the store answered, of unknown outcome
	if got := strictAvailability(t, r); got.Verdict != check.Fail || !strings.Contains(got.Detail, "1 of 14") || !strings.Contains(got.Detail, "12 of them timed out") {
		t.Fatalf("timeouts and an answered error: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
}

// TestAvailabilityLostAnswers: a Begin owed a 409 whose answer a fault
// injector lost (history.Op.Lost: scripts/lossy-exec.py's code lost) got
// the link's error, not the store's: counted apart, never a failure in
// strict mode, as a correct store behind the lossy link once failed.
func TestAvailabilityLostAnswers(t *testing.T) {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	for i := range 5 {
		r.id++
		in := models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp", ID: r.id, Now: t0.Add(time.Duration(int64(2+i) * ms))}
		r.h.AddOp(history.Op{Client: 10 + i, Input: in, Output: models.Output{Unknown: true}, Call: int64(2+i) * ms, Return: never,
			ErrAt: int64(3+i) * ms, Err: "lossy-exec: the answer was lost", Lost: true})
	}
	r.begin(2, "fp", 20, 21, inFlightD)
	if got := strictAvailability(t, r); got.Verdict != check.Pass || !strings.Contains(got.Detail, "0 got an error") || !strings.Contains(got.Detail, "5 of them had their answer lost") {
		t.Fatalf("lost answers alone: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
	r.beginErr(3, "fp", 22, 23) // an error the store answered
	if got := strictAvailability(t, r); got.Verdict != check.Fail || !strings.Contains(got.Detail, "1 of 7") {
		t.Fatalf("lost answers and an answered error: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
}

// TestAvailabilityLongWaits: a Begin owed a 409 whose error the store
// answered only after waiting longer than a claim's lease (SQLite's busy
// timeout, 5 s, beside a check's other scenarios at --keys 5000) is
// slowness, the machine's as much as the store's: counted apart, never a
// failure in strict mode (a correct store failed so, and its reproduce
// line passed). A quick error beside them still is one.
func TestAvailabilityLongWaits(t *testing.T) {
	r := newRec()
	lease := int64(model.LockTTL / time.Millisecond)
	for i := range 4 {
		r.beginErr(10+i, "fp", int64(i), lease+20) // waited past a lease
	}
	r.begin(1, "fp", lease, lease+1, claimedD("a", false)) // live when they gave up
	if got := strictAvailability(t, r); got.Verdict != check.Pass || got.Judged != 4 || !strings.Contains(got.Detail, "0 got an error") ||
		!strings.Contains(got.Detail, "4 of them got an error only after waiting longer than a claim's lease") {
		t.Fatalf("long waits alone: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
	r.beginErr(3, "fp", lease+5, lease+6) // a quick error: a refusal
	if got := strictAvailability(t, r); got.Verdict != check.Fail || !strings.Contains(got.Detail, "1 of 5") {
		t.Fatalf("long waits and a quick error: %s (judged %d): %s", got.Verdict, got.Judged, got.Detail)
	}
}
