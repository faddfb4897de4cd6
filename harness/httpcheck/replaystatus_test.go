package httpcheck

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestReplayStatusMayDifferWhenDeclared: a service that answers 201
// first and 200 on a replay, with the same body (PayPal does), fails
// replay-fidelity undeclared, and the violation says the bodies are the
// same and the status is not (two clipped bodies alike hid it); declared
// (--replay-any-2xx), it passes, and a replay with another body, or a
// 202, still fails.
func TestReplayStatusMayDifferWhenDeclared(t *testing.T) {
	run := func(replayStatus int, replayBody string, p Policy) Result {
		e := newEv()
		e.x(0, "i1", history.PurposeFirst, "k", "o", "b", 10, 20, 201, `{"charge":"ch_1","amount":100}`)
		e.charge("o", "i1", 15)
		e.x(1, "i2", history.PurposeReplay, "k", "o", "b", 30, 40, replayStatus, replayBody)
		return e.resultBy(t, Replay, p)
	}
	same := `{"amount":100,"charge":"ch_1"}`
	r := run(200, same, Policy{})
	if r.Pass || !strings.Contains(r.Violations[0].Detail, "the bodies are the same, the status is not: 200, the first answer's 201") {
		t.Fatalf("201 then 200, undeclared: %+v", r)
	}
	if r := run(200, same, Policy{ReplayAny2xx: true}); !r.Pass {
		t.Fatalf("201 then 200, declared: %+v", r)
	}
	if r := run(200, `{"amount":100,"charge":"ch_2"}`, Policy{ReplayAny2xx: true}); r.Pass {
		t.Fatalf("another body under another 2xx, declared: %+v", r)
	}
	if r := run(202, same, Policy{ReplayAny2xx: true}); r.Pass {
		t.Fatalf("a 202 (queued, not done) replaying a success, declared: %+v", r)
	}
}
