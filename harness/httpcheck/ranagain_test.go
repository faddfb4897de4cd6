package httpcheck

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestRerunIsNoSavedError: a key whose probes each ran its work again,
// the provider refusing it because the downstream key had charged
// another order first (a reuse of the key with another order ran under
// it, after a release on error), answers the same 5xx for ever. It was
// taken for a saved error: undecided, asking for --saves-errors, and
// with it declared a pass. Its probes called the provider, so no answer
// was replayed, and the order can never be charged: stuck.
func TestRerunIsNoSavedError(t *testing.T) {
	for _, p := range []Policy{{}, {SavesErrors: true}} {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 8, 500, `{"error":"charge failed"}`)
		e.x(1, "i1", history.PurposeReuse, "k", "o2", "b2", 10, 30, 500, `{"error":"charge failed"}`)
		e.chargeOutcome("o2", "", 12, 20, history.OutcomeFailed) // ch_1, by the downstream key "charge:k"
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 100, 120, 500, `{"error":"charge failed"}`)
		e.x(-1, "i1", history.PurposeProbe, "k", "o", "b", 200, 220, 500, `{"error":"charge failed"}`)
		cs := e.l.Charges()
		cs[0].Key = "charge:k"
		for _, at := range []int64{110, 210} {
			cs = append(cs, history.Charge{ID: "ch_1", Order: "o", Key: "charge:k", Client: -1, At: at})
		}
		e.l = history.LedgerOf(cs)
		r := e.resultBy(t, Liveness, p)
		if r.Pass || len(r.Violations) != 1 || r.Violations[0].Cause != CauseServerError ||
			!strings.Contains(r.Violations[0].Detail, `the downstream key "charge:k" having made charge ch_1 for order o2 first`) {
			t.Errorf("saves errors %v: %+v, want the key stuck, its downstream key named", p.SavesErrors, r)
		}
		if strings.Contains(r.Unjudged, "--saves-errors") {
			t.Errorf("saves errors %v: asks for --saves-errors: %s", p.SavesErrors, r.Unjudged)
		}
	}
}
