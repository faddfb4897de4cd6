package httpcheck

import (
	"fmt"
	"slices"
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

// TestAcceptedOnlyIsSaid: an asynchronous service answers 202 and does
// the work later; one that dropped accepted jobs passed, saying every key
// got a success. The keys that got only 202, and those of them whose
// order was never charged, are said not judged.
func TestAcceptedOnlyIsSaid(t *testing.T) {
	e := newEv()
	e.x(0, "i1", history.PurposeFirst, "k1", "o1", "b1", 5, 8, 202, `{"status":"accepted"}`)
	e.charge("o1", "i1", 20)
	e.x(1, "i1", history.PurposeFirst, "k2", "o2", "b2", 5, 8, 202, `{"status":"accepted"}`)
	e.x(2, "i1", history.PurposeFirst, "k3", "o3", "b3", 5, 8, 201, `{"charge":"ch_2"}`)
	e.charge("o3", "i1", 6)
	r := e.result(t, Answers)
	if !r.Pass || !slices.ContainsFunc(r.Notes, func(n string) bool {
		return strings.Contains(n, "2 keys got only 202 Accepted") && strings.Contains(n, "never charged the orders of 1 of them")
	}) {
		t.Fatalf("%+v, want the accepted keys said not judged", r)
	}
	if !strings.Contains(r.Detail, "(2 of them only 202 Accepted)") {
		t.Errorf("detail %q, want the accepted keys counted apart", r.Detail)
	}
}
