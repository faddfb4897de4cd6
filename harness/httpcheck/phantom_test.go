package httpcheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestASuccessNeverChargedFails: a service that saves "succeeded" before
// it charges, killed between the two, replays that success to the retry:
// the client was told its payment went through, the provider never
// charged it, and nothing was charged twice. The answers checker fails
// it, naming the key; every run passed it before.
func TestASuccessNeverChargedFails(t *testing.T) {
	e := newEv()
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("k%d", i)
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 201, `{"status":"succeeded"}`)
		e.charge("o"+k, "i1", int64(10*i+2))
	}
	// k9's first request saved its success and died before its charge;
	// the retry on i2 got the saved success.
	e.x(1, "i2", history.PurposeFirst, "k9", "ok9", "b", 100, 0, 0, "")
	e.x(1, "i1", history.PurposeRetry, "k9", "ok9", "b", 150, 160, 201, `{"status":"succeeded"}`)
	r := e.result(t, Answers)
	if r.Pass || len(r.Violations) != 1 {
		t.Fatalf("a success for an order never charged passed: %+v", r)
	}
	v := r.Violations[0]
	if v.Cause != CauseNeverCharged || v.Key != "k9" || v.At != 160 || !strings.Contains(v.Detail, "never charged its order ok9") {
		t.Fatalf("the violation does not name the key, its order and when: %+v", v)
	}
	// A bug found in what was tested: the run is no "NOTHING TESTED"
	// (one of 18,108 requests was headed so).
	if n := NothingTested([]Result{r}, false); n != "" {
		t.Errorf("a run that tested its keys reads as nothing tested: %s", n)
	}
}

// TestNeverChargedLeavesOutWhatIsNoSuccessOrShared: a 202 (queued, not
// done), an error, and a key drawn for two orders (its second
// operation answered the first's success, which the answers checker
// notes apart) are no success for an uncharged order; nor is a success
// for an order charged after it was answered, or charged by a repeat
// that took effect.
func TestNeverChargedLeavesOutWhatIsNoSuccessOrShared(t *testing.T) {
	e := newEv()
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("k%d", i)
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 200, "x")
		e.charge("o"+k, "i1", int64(10*i+2))
	}
	e.x(1, "i1", history.PurposeFirst, "q", "oq", "b", 100, 105, 202, "accepted")
	e.x(2, "i1", history.PurposeFirst, "e", "oe", "b", 100, 105, 500, "oops")
	e.x(3, "i1", history.PurposeFirst, "k0", "o-other", "b2", 110, 115, 200, "x")
	e.x(4, "i1", history.PurposeFirst, "late", "olate", "b", 120, 125, 200, "x")
	e.charge("olate", "i1", 300)
	r := e.result(t, Answers)
	for _, v := range r.Violations {
		if v.Cause == CauseNeverCharged {
			t.Fatalf("not a success for an uncharged order: %+v", v)
		}
	}
}
