package httpcheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestAnswersSaysFirst422sWereNotTested: keys whose first request got
// 422 and never a success (an earlier run's keys, repeated by a
// --key-format without %s) are not tested, and when they are fewer than
// half the run passes on the others, saying so: it said nothing of a
// third of its keys.
func TestAnswersSaysFirst422sWereNotTested(t *testing.T) {
	e := newEv()
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("k%d", i)
		if i < 3 {
			e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 422, "key reused with another body")
			continue
		}
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 200, "x")
		e.charge("o"+k, "i1", int64(10*i+2))
	}
	r := e.result(t, Answers)
	if !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "3 of 10 keys got 422 to their first request") || !strings.Contains(r.Notes[0], "%s") {
		t.Fatalf("3 of 10 keys refused 422 at once: %+v", r)
	}
}

// TestAnswersSaysSharedKeysWereNotTested: two operations sent the same
// key (a --key-format of too few random digits), the second refused
// 422: the run says the second operation was not tested as its own.
func TestAnswersSaysSharedKeysWereNotTested(t *testing.T) {
	e := newEv()
	for i := 0; i < 4; i++ {
		k := fmt.Sprintf("k%d", i)
		e.x(0, "i1", history.PurposeFirst, k, "o"+k, "b", int64(10*i), int64(10*i+5), 200, "x")
		e.charge("o"+k, "i1", int64(10*i+2))
	}
	e.x(1, "i1", history.PurposeFirst, "k0", "o-other", "b2", 60, 65, 422, "key reused with another body")
	r := e.result(t, Answers)
	if !r.Pass || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "1 operation was sent a key another operation had drawn first") {
		t.Fatalf("a key drawn for two operations: %+v", r)
	}
}

// TestAnswersLeavesMostlySharedKeysUnjudged: when most operations were
// sent a key another had drawn first, the run tested its key pattern,
// not the service: the answers are not judged, where a note beside a
// pass let 5,286 untested operations of 5,302 pass.
func TestAnswersLeavesMostlySharedKeysUnjudged(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k0", "o0", "b", 0, 5, 200, "x")
	e.charge("o0", "i1", 2)
	for i := 1; i < 4; i++ {
		e.x(i, "i1", history.PurposeFirst, "k0", fmt.Sprintf("o%d", i), fmt.Sprintf("b%d", i), int64(10*i), int64(10*i+5), 422, "key reused with another body")
	}
	r := e.result(t, Answers)
	if !r.Pass || !strings.Contains(r.Unjudged, "3 of 4 operations were sent a key another operation had drawn first") {
		t.Fatalf("3 of 4 operations on one key: %+v", r)
	}
	// Some keys were tested: the run is undecided, not "NOTHING TESTED".
	if n := NothingTested([]Result{r}, false); n != "" {
		t.Fatalf("a run that tested one key of four reads as nothing tested: %s", n)
	}
}
