package check_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// beginErr records a Begin by client, called at call, whose error came
// back at errAt with its outcome unknown (a timeout).
func (r *rec) beginErr(client int, fp string, call, errAt int64) {
	r.id++
	in := models.Input{Kind: models.Begin, Key: key, Fingerprint: fp, ID: r.id, Now: t0.Add(time.Duration(call * ms))}
	r.h.AddOp(history.Op{Client: client, Input: in, Output: models.Output{Unknown: true}, Call: call * ms, Return: never, ErrAt: errAt * ms, Err: "timeout"})
}

// calm records n Begins away from contention, from at ms on: each the
// first of a key of its own, of which the first erred get an error (of
// unknown outcome, a timeout, if unknown; else declared not applied, a
// session the server refused) and the rest claim.
func (r *rec) calm(n, erred int, at int64, unknown bool) {
	for i := range n {
		k := stores.KeyRef{Tenant: "t0", Key: fmt.Sprintf("calm-%d-%03d", at, i)}
		in := models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0.Add(time.Duration((at + int64(i)) * ms))}
		call := at + int64(i)
		switch {
		case i < erred && unknown:
			r.id++
			in.ID = r.id
			r.h.AddOp(history.Op{Client: 50 + i, Input: in, Output: models.Output{Unknown: true}, Call: call * ms, Return: never, ErrAt: (call + 1) * ms, Err: "timeout"})
		case i < erred:
			r.op(50+i, in, models.Output{NotApplied: true}, call, call+1)
		default:
			d := claimedD(fmt.Sprintf("calm-%d-%d", at, i), false)
			d.DecidedAt = in.Now
			r.op(50+i, in, models.Output{Decision: d}, call, call+1)
		}
	}
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
		r.beginNotApplied(6, "fp", 55, 62) // the save may have landed first
		r.calm(100, 0, 200, false)         // the store errs not at all away from contention
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
		r.calm(100, 0, 200, false)
		got := judge(r)
		if got.Judged != 1 || !strings.Contains(got.Detail, "finding: 1 of 1") || !strings.Contains(got.Detail, "1 declared not applied") {
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
	strict := func(r *rec) check.Result {
		for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: 10 * time.Second, StrictAvailability: true}) {
			if c.Checker == check.Availability {
				return c
			}
		}
		t.Fatal("no availability checker")
		return check.Result{}
	}
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	for i := range 4 {
		r.beginNotApplied(10+i, "fp", int64(2+i), int64(3+i))
	}
	got := strict(r)
	if got.Verdict != check.Fail || len(got.Violations) != 1 || got.Violations[0].Key != key.String() || !strings.Contains(got.Detail, "4 of 4") {
		t.Fatalf("%s %v: %s", got.Verdict, got.Violations, got.Detail)
	}
	r = newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.begin(2, "fp", 2, 3, inFlightD)
	if got := strict(r); got.Verdict != check.Pass || len(got.Violations) != 0 {
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
		for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: long, ProbeClient: probe, LinTimeout: 10 * time.Second}) {
			if c.Checker == check.Availability {
				return c
			}
		}
		t.Fatal("no availability checker")
		return check.Result{}
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

// TestAvailabilityAwayFromContention: errors that come as often where no
// claim is live, at the same times (a server's refused sessions), are not
// contention's cost, even in strict mode; errors well above that rate
// where a 409 was due still are, and so are errors where calm Begins
// erred only at other times. Timeouts where a Begin that met no live
// claim timed out too, at the same time (a machine that cannot keep up),
// are not counted; elsewhere they are.
func TestAvailabilityAwayFromContention(t *testing.T) {
	strict := func(r *rec) check.Result {
		for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: 10 * time.Second, StrictAvailability: true}) {
			if c.Checker == check.Availability {
				return c
			}
		}
		t.Fatal("no availability checker")
		return check.Result{}
	}
	// contended records a claim and ten Begins that meet it, of which the
	// first erred get an error: a timeout if unknown, else declared.
	contended := func(r *rec, erred int, unknown bool) {
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		for i := range 10 {
			switch {
			case i < erred && unknown:
				r.beginErr(10+i, "fp", int64(2+i), int64(3+i))
			case i < erred:
				r.beginNotApplied(10+i, "fp", int64(2+i), int64(3+i))
			default:
				r.begin(10+i, "fp", int64(2+i), int64(3+i), inFlightD)
			}
		}
	}
	for _, c := range []struct {
		name            string
		erred           int
		unknown         bool
		calm            func(r *rec)
		fail            bool
		detail, detail2 string
	}{
		{"refusals at the calm rate", 2, false, func(r *rec) { r.calm(100, 20, 200, false) }, false,
			"20 of 101 Begins that met no live claim erred too", "not contention's cost"},
		{"refusals well above the calm rate", 10, false, func(r *rec) { r.calm(100, 5, 200, false) }, true,
			"10 of 10", "5 of 101"},
		{"refusals away from contention at another time", 2, false, func(r *rec) { r.calm(100, 0, 200, false); r.calm(100, 20, 5000, false) }, true,
			"2 of 10", "20 of 201"},
		{"timeouts where a calm Begin timed out too", 10, true, func(r *rec) { r.calm(100, 1, 200, true) }, false,
			"was judged", "10 Begins that met a live claim got an error of unknown outcome"},
		{"timeouts where calm Begins timed out only at another time", 10, true, func(r *rec) { r.calm(100, 0, 200, true); r.calm(100, 1, 5000, true) }, true,
			"10 of 10", "10 of unknown outcome"},
	} {
		r := newRec()
		contended(r, c.erred, c.unknown)
		c.calm(r)
		got := strict(r)
		if (got.Verdict == check.Fail) != c.fail || !strings.Contains(got.Detail, c.detail) || !strings.Contains(got.Detail, c.detail2) {
			t.Errorf("%s: %s (judged %d): %s", c.name, got.Verdict, got.Judged, got.Detail)
		}
	}
}
