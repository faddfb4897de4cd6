package httpcheck

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestReplayOfAnOwnerThatLostItsClaim: a request sent before the key's
// first success came, its owner paused past its lease while a retry took
// the key over and answered, answered its own result after it: two
// successes that differ for one key (an unfenced save) passed, since only
// requests sent after the first success were judged. Its 409, or the same
// answer, is no violation.
func TestReplayOfAnOwnerThatLostItsClaim(t *testing.T) {
	run := func(status int, reply string) Result {
		e := newEv()
		e.x(0, "i3", history.PurposeRace, "k", "o", "b", 10, 150, status, reply)
		e.x(1, "i1", history.PurposeRetry, "k", "o", "b", 100, 120, 200, `{"id":"pay_1","charge":"ch_1"}`)
		return e.result(t, Replay)
	}
	r := run(200, `{"id":"pay_2","charge":"ch_1"}`)
	if r.Pass || len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Detail, "two successes that differ for one key") {
		t.Fatalf("an owner that lost its claim answered its own result: %+v", r)
	}
	if r := run(200, `{"charge":"ch_1","id":"pay_1"}`); !r.Pass || !strings.Contains(r.Detail, "1 of them successes to requests sent before it came") {
		t.Errorf("the same answer, fields in another order: %+v", r)
	}
	for _, status := range []int{409, 500, 202} {
		if r := run(status, "busy"); !r.Pass {
			t.Errorf("a %d to a request sent before the first success: %+v", status, r)
		}
	}
}
