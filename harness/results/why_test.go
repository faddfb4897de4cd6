package results_test

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
)

// TestUndecidedNamesTheFirstStoreError: an undecided scenario's reason
// says how many calls ended in an error that leaves their outcome unknown
// and the first one, so that a server gone away is named.
func TestUndecidedNamesTheFirstStoreError(t *testing.T) {
	s := results.ScenarioResult{Name: "race", Verdict: check.Unknown, Outcomes: map[string]int{"unknown": 240},
		FirstUnknown: "dial tcp 127.0.0.1:5432: connect: connection refused",
		Checkers:     []check.Result{{Checker: "liveness", Verdict: check.Unknown, Detail: "no final probe ran"}}}
	got := s.WhyUndecided()
	if !strings.Contains(got, "liveness: no final probe ran") || !strings.Contains(got, "240 store calls ended in an error") ||
		!strings.Contains(got, "connection refused") {
		t.Errorf("WhyUndecided: %q", got)
	}
}
