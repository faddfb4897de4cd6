package httpcheck

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestChargedManyTimesIsCounted: an order charged five times read
// "charged twice", naming the first two: the violation says how many.
func TestChargedManyTimesIsCounted(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 5, 100, 201, `{"charge":"ch_1"}`)
	for _, at := range []int64{10, 20, 30} {
		e.charge("o", "i1", at)
	}
	r := e.result(t, AtMostOnce)
	if r.Pass || len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Detail, "(the order was charged 3 times in all)") {
		t.Fatalf("%+v, want the order's charges counted", r)
	}
}
