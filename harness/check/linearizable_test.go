package check_test

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/history/historytest"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

func TestLinearizable(t *testing.T) {
	t.Run("two fresh claims of one key fail", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 5, claimedD("a", false))
		r.begin(2, "fp", 1, 6, claimedD("b", false))
		want(t, r, check.Linearizable, check.Fail, "no order the decision table allows")
	})
	t.Run("an unanswered claim may have taken effect: a 409 after it passes", func(t *testing.T) {
		r := newRec()
		r.beginUnknown(1, "fp", 0)
		r.begin(2, "fp", 10, 11, inFlightD)
		want(t, r, check.Linearizable, check.Pass, "")
	})
	t.Run("an unanswered claim may not have taken effect: a fresh claim after it passes", func(t *testing.T) {
		r := newRec()
		r.beginUnknown(1, "fp", 0)
		r.begin(2, "fp", 10, 11, claimedD("b", false))
		want(t, r, check.Linearizable, check.Pass, "")
	})
	// The Begin's clock reading is said, against the claim's locked_at
	// and LockTTL: a 409 at exactly LockTTL (stale-boundary) was told in
	// real time alone, a few milliseconds after the claim.
	t.Run("a 409 at LockTTL by the request's clock says the clock's reading", func(t *testing.T) {
		r := newRec()
		claim := claimedD("a", false)
		claim.DecidedAt = t0
		r.op(1, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0}, models.Output{Decision: claim}, 0, 1)
		stale := inFlightD
		stale.DecidedAt = t0.Add(model.LockTTL)
		r.op(2, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0.Add(model.LockTTL)}, models.Output{Decision: stale}, 5, 6)
		want(t, r, check.Linearizable, check.Fail, "its clock reading 00:00:00.100: 100ms after the in-flight claim's locked_at, LockTTL 100ms")
	})
	// A clock behind the owner's reads before locked_at: said so, not
	// as a negative time after it.
	t.Run("a takeover by a clock behind the owner's says it read before locked_at", func(t *testing.T) {
		r := newRec()
		claim := claimedD("a", false)
		claim.DecidedAt = t0
		r.op(1, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0}, models.Output{Decision: claim}, 0, 1)
		taken := claimedD("b", true)
		taken.DecidedAt = t0.Add(-5 * time.Millisecond)
		r.op(2, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0.Add(-5 * time.Millisecond)}, models.Output{Decision: taken}, 5, 6)
		want(t, r, check.Linearizable, check.Fail, "5ms before the in-flight claim's locked_at")
	})
	t.Run("a 409 long after every claim went stale fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(2, "fp", 500, 501, inFlightD)
		want(t, r, check.Linearizable, check.Fail, "no order")
	})
}

// linearization runs the checkers with Evidence.Keep as asked and returns
// the linearizability checker's result.
func linearization(t *testing.T, h *history.History, l *history.Ledger, m models.Config, timeout time.Duration, keep bool) check.Result {
	t.Helper()
	for _, c := range check.Run(check.Evidence{Hist: h, Ledger: l, Model: m, ProbeClient: probe, LinTimeout: timeout, Keep: keep}) {
		if c.Checker == check.Linearizable {
			return c
		}
	}
	t.Fatal("no linearizability result")
	return check.Result{}
}

// keptKeys are the keys of the operations in what the checker kept for a
// page (porcupine's partial linearizations), and how many partitions
// (keys) it kept.
func keptKeys(l *check.Linearization) (map[string]bool, int) {
	keys := map[string]bool{}
	parts := l.Info.PartialLinearizationsOperations()
	for _, part := range parts {
		for _, lin := range part {
			for _, op := range lin {
				keys[op.Input.(models.Input).Key.String()] = true
			}
		}
	}
	return keys, len(parts)
}

// TestLinearizationKept: what a page needs is kept only when asked for;
// for a small history it is the whole linearization; past
// check.VisualizeCap operations a passing check keeps only the note that
// the history is too large to draw; a failing check keeps its failing
// keys alone, whatever the size of the rest.
func TestLinearizationKept(t *testing.T) {
	small := happy()
	if r := linearization(t, small.h, small.l, model, 10*time.Second, false); r.Linearization != nil {
		t.Fatalf("kept a linearization nobody asked for: %+v", r.Linearization)
	}
	r := linearization(t, small.h, small.l, model, 10*time.Second, true)
	if lin := r.Linearization; lin == nil || lin.TooLarge || lin.Ops != len(small.h.Ops()) || lin.Model.Step == nil {
		t.Fatalf("a small history: %+v; want the whole linearization of %d operations", lin, len(small.h.Ops()))
	}
	if keys, parts := keptKeys(r.Linearization); parts != 1 || !keys[key.String()] {
		t.Fatalf("a small history: kept %d partitions of keys %v, want %s", parts, keys, key)
	}

	big := models.Config{LockTTL: 100 * time.Millisecond, Retention: time.Hour}
	h, l := historytest.Storm(check.VisualizeCap + 10)
	r = linearization(t, h, l, big, 10*time.Second, true)
	if lin := r.Linearization; r.Verdict != check.Pass || lin == nil || !lin.TooLarge || lin.Ops != len(h.Ops()) {
		t.Fatalf("a large passing history: %s, %+v; want the note that %d operations are too many", r.Verdict, lin, len(h.Ops()))
	}
	// The same history with one key claimed twice at once: that key is
	// kept alone.
	bad := stores.KeyRef{Tenant: "t0", Key: "twice"}
	for c, tok := range []string{"x1", "x2"} {
		h.AddOp(history.Op{Client: c, Input: models.Input{ID: 1_000_000 + c, Kind: models.Begin, Key: bad, Fingerprint: "fp", Now: t0},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: stores.Token(tok), DecidedAt: t0}}, Call: 0, Return: 10})
	}
	r = linearization(t, h, l, big, 10*time.Second, true)
	lin := r.Linearization
	if r.Verdict != check.Fail || lin == nil || lin.TooLarge || lin.Ops != 2 {
		t.Fatalf("a large failing history: %s, %+v; want the failing key's 2 operations", r.Verdict, lin)
	}
	if keys, parts := keptKeys(lin); parts != 1 || len(keys) != 1 || !keys[bad.String()] {
		t.Fatalf("a large failing history: kept %d partitions of keys %v; want %s alone", parts, keys, bad)
	}
}

// TestLinearizableLargeHistoryByKey: a history too large to draw is
// checked one key at a time: a healthy one passes, keeping the note that
// it is too large to draw, one bad key among thousands fails and is named
// (and kept alone for the page), and a budget that runs out is undecided,
// not a pass, with nothing kept.
func TestLinearizableLargeHistoryByKey(t *testing.T) {
	n := check.VisualizeCap + 10_000
	h, l := historytest.Storm(n)
	r := linearization(t, h, l, model, time.Minute, true)
	if r.Verdict != check.Pass || r.Linearization == nil || !r.Linearization.TooLarge {
		t.Fatalf("healthy history: %s %s; kept %+v", r.Verdict, r.Detail, r.Linearization)
	}

	// A fresh claim of a key just done, no takeover: no order allows it.
	bad := stores.KeyRef{Tenant: "t0", Key: "order-1234"}
	end := 1234*20*int64(time.Microsecond) + 100*int64(time.Microsecond) // after its save, well inside the retention
	h.AddOp(history.Op{Client: 7, Input: models.Input{ID: n + 1, Kind: models.Begin, Key: bad, Fingerprint: "fp", Now: t0.Add(time.Duration(end))},
		Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "late", DecidedAt: t0.Add(time.Duration(end))}}, Call: end, Return: end + 10})
	r = linearization(t, h, l, model, time.Minute, true)
	if r.Verdict != check.Fail || len(r.Violations) != 1 || r.Violations[0].Key != bad.String() {
		t.Fatalf("one bad key: %s %s %v", r.Verdict, r.Detail, r.Violations)
	}
	if r.Linearization == nil || r.Linearization.TooLarge {
		t.Fatalf("one bad key: kept %+v, want its linearization", r.Linearization)
	}
	if keys, _ := keptKeys(r.Linearization); len(keys) != 1 || !keys[bad.String()] {
		t.Errorf("the failing key should be kept alone: kept %v", keys)
	}

	if r = linearization(t, h, l, model, time.Nanosecond, true); r.Verdict != check.Unknown || r.Linearization != nil {
		t.Errorf("a spent budget: %s %s, kept %+v; want unknown, nothing kept", r.Verdict, r.Detail, r.Linearization)
	}
}
