package check_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
)

// manyUnknowns is one key raced by clients whose answers were lost: the
// first claims it, n others' Begins (one every millisecond) never
// answer, others are told 409 meanwhile, the owner saves and the rest
// are replayed. takeoverAt, when positive, adds an answered takeover at
// that millisecond.
func manyUnknowns(n int, takeoverAt int64) *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	for i := range n {
		r.beginUnknown(10+i, "fp", int64(1+i))
	}
	r.begin(2, "fp", 20, 21, inFlightD)
	r.begin(3, "fp", 40, 41, inFlightD)
	if takeoverAt > 0 {
		r.begin(4, "fp", takeoverAt, takeoverAt+1, claimedD("b", true))
	}
	r.complete(1, "a", resp, 60, 61, false, false)
	r.begin(2, "fp", 70, 71, replayD(resp))
	r.begin(3, "fp", 80, 81, replayD(resp))
	r.begin(probe, "fp", 300, 301, replayD(resp))
	return r
}

// TestManyUnknownBegins: fifty unanswered Begins on one key are decided
// (porcupine alone ran out of its budget on such keys), either way: a
// history the decision table allows passes, and one with a takeover of a
// claim 50 ms old (LockTTL 100 ms) among them still fails.
func TestManyUnknownBegins(t *testing.T) {
	r := manyUnknowns(50, 0)
	got := r.judge(t, check.Linearizable)
	if got.Verdict != check.Pass || !strings.Contains(got.Detail, "merged") {
		t.Fatalf("%s: %s, want a pass that merged unanswered Begins", got.Verdict, got.Detail)
	}
	want(t, manyUnknowns(50, 50), check.Linearizable, check.Fail, "no order the decision table allows")
}

// BenchmarkManyUnknownBegins times the linearizability check of
// fifty unanswered Begins on one key (manyUnknowns).
func BenchmarkManyUnknownBegins(b *testing.B) {
	r := manyUnknowns(50, 0)
	for b.Loop() {
		for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: time.Minute}) {
			if c.Checker == check.Linearizable && c.Verdict != check.Pass {
				b.Fatalf("%s: %s", c.Verdict, c.Detail)
			}
		}
	}
}
