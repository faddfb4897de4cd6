package harness

import (
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
)

// An interrupt cancels the final probes: the failures of the checkers that
// read them become undecided, and the run's verdict is folded again; a
// failure of any other checker stands.
func TestInterruptedProbesAreNoEvidence(t *testing.T) {
	fail := func(c string) check.Result {
		return check.Result{Checker: c, Verdict: check.Fail, Judged: 1, Violations: []check.Violation{{Checker: c, Detail: "x"}}}
	}
	j := Judged{Checkers: []check.Result{fail(check.Liveness), fail(check.Retention), {Checker: check.AtMostOnce, Verdict: check.Pass, Judged: 3}}}
	j.cutProbes()
	if j.Verdict != check.Unknown || len(j.Violations) != 0 {
		t.Fatalf("probe failures after an interrupt: %s with %d violations, want unknown with none", j.Verdict, len(j.Violations))
	}
	j = Judged{Checkers: []check.Result{fail(check.Liveness), fail(check.AtMostOnce)}}
	j.cutProbes()
	if j.Verdict != check.Fail || len(j.Violations) != 1 || j.Violations[0].Checker != check.AtMostOnce {
		t.Fatalf("an at-most-once failure after an interrupt: %s %+v, want it to stand alone", j.Verdict, j.Violations)
	}
}
