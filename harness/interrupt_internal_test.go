package harness

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
)

// An interrupt cancels the workload's calls and the final probes: the
// failures of the checkers that a cut can fake (liveness, retention, and
// availability, whose errors the run's own cancellation made) become
// undecided, and the run's verdict is folded again; a failure of a
// checker whose violations a cut cannot fake (prefixSound) stands.
func TestInterruptedProbesAreNoEvidence(t *testing.T) {
	fail := func(c string) check.Result {
		return check.Result{Checker: c, Verdict: check.Fail, Judged: 1, Violations: []check.Violation{{Checker: c, Detail: "x"}}}
	}
	j := Judged{Checkers: []check.Result{fail(check.Liveness), fail(check.Retention), fail(check.Availability), {Checker: check.AtMostOnce, Verdict: check.Pass, Judged: 3}}}
	j.cutShort()
	if j.Verdict != check.Unknown || len(j.Violations) != 0 {
		t.Fatalf("probe failures after an interrupt: %s with %d violations, want unknown with none", j.Verdict, len(j.Violations))
	}
	j = Judged{Checkers: []check.Result{fail(check.Liveness), fail(check.AtMostOnce)}}
	j.cutShort()
	if j.Verdict != check.Fail || len(j.Violations) != 1 || j.Violations[0].Checker != check.AtMostOnce {
		t.Fatalf("an at-most-once failure after an interrupt: %s %+v, want it to stand alone", j.Verdict, j.Violations)
	}
	// A finding (availability's, not strict) stays one, and says the
	// interrupt may have made it: it blamed the store for the run's own
	// cancel ("2 of 2 Begins … context canceled").
	finding := check.Result{Checker: check.Availability, Verdict: check.Pass, Judged: 2, Detail: "finding: 2 of 2 Begins … context canceled"}
	j = Judged{Checkers: []check.Result{finding}}
	j.cutShort()
	if f := j.Checkers[0].Finding(); j.Verdict != check.Pass || !strings.Contains(f, "context canceled") || !strings.Contains(f, "may be the interrupt's doing") {
		t.Fatalf("an availability finding after an interrupt: %s, %q", j.Verdict, f)
	}
}

// A workload that could not finish for thousands of keys says the first
// few reasons and counts the rest.
func TestFirstOfCountsTheRest(t *testing.T) {
	if got := firstOf([]string{"a", "b"}, 5); got != "a; b" {
		t.Errorf("firstOf of two: %q", got)
	}
	if got := firstOf([]string{"a", "b", "c", "d"}, 2); got != "a; b; and 2 more" {
		t.Errorf("firstOf of four, two shown: %q", got)
	}
}
