package httpcheck

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestReplayOfAnotherKey: a replay served from another key's record (a
// shared buffer) said which field differed first, alphabetically, where
// the body was plainly another order's; it names that key.
func TestReplayOfAnotherKey(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k1", "o1", "b1", 5, 8, 200, `{"order":"o1","amount":863,"charge":"ch_1"}`)
	e.x(1, "i1", history.PurposeFirst, "k2", "o2", "b2", 5, 9, 200, `{"order":"o2","amount":567,"charge":"ch_2"}`)
	e.x(2, "i1", history.PurposeReplay, "k1", "o1", "b1", 20, 25, 200, `{"charge": "ch_2", "amount": 567, "order": "o2"}`)
	r := e.result(t, Replay)
	if r.Pass || len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Detail, "it is the answer key k2 got first") {
		t.Fatalf("%+v, want the other key named", r)
	}
	e.x(3, "i1", history.PurposeReplay, "k2", "o2", "b2", 30, 35, 200, `{"order":"o2","amount":568,"charge":"ch_2"}`)
	for _, v := range e.result(t, Replay).Violations {
		if v.Key == "k2" && strings.Contains(v.Detail, "another key's answer") {
			t.Errorf("a replay of its own key's order, one field off: %s", v.Detail)
		}
	}
}
