package check_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
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
	t.Run("a 409 long after every claim went stale fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(2, "fp", 500, 501, inFlightD)
		want(t, r, check.Linearizable, check.Fail, "no order")
	})
}

// TestVisualizationNamesItsKeys: porcupine's page carries a labelled row
// per key, so a reader can tell which partition is which.
func TestVisualizationNamesItsKeys(t *testing.T) {
	r := happy()
	var page bytes.Buffer
	check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: 10 * time.Second, Visualization: &page})
	if !strings.Contains(page.String(), "key t0/order-o000") {
		t.Fatalf("the visualisation (%d bytes) has no row labelled with the key", page.Len())
	}
}

// TestVisualization: porcupine's page is drawn in full for a small
// history; past check.VisualizeCap operations a passing check writes a
// short page that says why there is none; a failing check draws only its
// failing keys, whatever the size of the rest.
func TestVisualization(t *testing.T) {
	vis := func(h *history.History, l *history.Ledger, m models.Config) string {
		var b bytes.Buffer
		check.Run(check.Evidence{Hist: h, Ledger: l, Model: m, ProbeClient: probe, LinTimeout: 10 * time.Second, Visualization: &b})
		return b.String()
	}
	const note = "porcupine's visualisation is left out"
	small := happy()
	if v := vis(small.h, small.l, model); v == "" || strings.Contains(v, note) {
		t.Fatalf("a small history: %d bytes, note %v; want the drawn page", len(v), strings.Contains(v, note))
	}
	big := models.Config{LockTTL: 100 * time.Millisecond, Retention: time.Hour}
	h, l := bigHistory(check.VisualizeCap + 10)
	if v := vis(h, l, big); !strings.Contains(v, note) || len(v) > 4096 {
		t.Fatalf("a large passing history: %d bytes, note %v; want the short page", len(v), strings.Contains(v, note))
	}
	// The same history with one key claimed twice at once: the page draws
	// that key alone.
	bad := stores.KeyRef{Tenant: "t0", Key: "twice"}
	for c, tok := range []string{"x1", "x2"} {
		h.AddOp(history.Op{Client: c, Input: models.Input{ID: 1_000_000 + c, Kind: models.Begin, Key: bad, Fingerprint: "fp", Now: t0},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: stores.Token(tok), DecidedAt: t0}}, Call: 0, Return: 10})
	}
	v := vis(h, l, big)
	// Operations are drawn without their key: the tokens tell them apart.
	if v == "" || strings.Contains(v, note) || strings.Contains(v, "tok-") || !strings.Contains(v, "x2") {
		t.Fatalf("a large failing history: %d bytes, note %v, other keys %v, failing key %v; want the failing key alone",
			len(v), strings.Contains(v, note), strings.Contains(v, "tok-"), strings.Contains(v, "x2"))
	}
}

// TestLinearizableLargeHistoryByKey: a history too large to draw is
// checked one key at a time: a healthy one passes with a short page in
// place of the drawing, one bad key among thousands fails and is named
// (and drawn alone), and a budget that runs out is undecided, not a pass.
func TestLinearizableLargeHistoryByKey(t *testing.T) {
	lin := func(h *history.History, l *history.Ledger, timeout time.Duration) (check.Result, string) {
		var vis bytes.Buffer
		for _, c := range check.Run(check.Evidence{Hist: h, Ledger: l, Model: model, ProbeClient: probe, LinTimeout: timeout, Visualization: &vis}) {
			if c.Checker == check.Linearizable {
				return c, vis.String()
			}
		}
		t.Fatal("no linearizability result")
		return check.Result{}, ""
	}
	n := check.VisualizeCap + 10_000
	h, l := bigHistory(n)
	r, page := lin(h, l, time.Minute)
	if r.Verdict != check.Pass || !strings.Contains(page, "more than the") {
		t.Fatalf("healthy history: %s %s; page %.200q", r.Verdict, r.Detail, page)
	}

	// A fresh claim of a key just done, no takeover: no order allows it.
	bad := stores.KeyRef{Tenant: "t0", Key: "order-1234"}
	end := 1234*20*int64(time.Microsecond) + 100*int64(time.Microsecond) // after its save, well inside the retention
	h.AddOp(history.Op{Client: 7, Input: models.Input{ID: n + 1, Kind: models.Begin, Key: bad, Fingerprint: "fp", Now: t0.Add(time.Duration(end))},
		Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "late", DecidedAt: t0.Add(time.Duration(end))}}, Call: end, Return: end + 10})
	r, page = lin(h, l, time.Minute)
	if r.Verdict != check.Fail || len(r.Violations) != 1 || r.Violations[0].Key != bad.String() {
		t.Fatalf("one bad key: %s %s %v", r.Verdict, r.Detail, r.Violations)
	}
	if !strings.Contains(page, "order-1234") || strings.Contains(page, "order-1233") {
		t.Errorf("the page should draw the failing key only")
	}

	if r, _ = lin(h, l, time.Nanosecond); r.Verdict != check.Unknown {
		t.Errorf("a spent budget: %s %s, want unknown", r.Verdict, r.Detail)
	}
}
