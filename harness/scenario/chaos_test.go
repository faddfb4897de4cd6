package scenario_test

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// TestChaosMemory: on the memory store only the client faults are
// possible; the others are listed as skipped, with the reason, and the
// correct store passes.
func TestChaosMemory(t *testing.T) {
	s := harnesstest.RunOne(t, harnesstest.Options(t, "memory", stores.Correct, "chaos"))
	if s.Verdict != check.Pass {
		t.Fatalf("verdict %s: %s %v", s.Verdict, s.Error, s.Violations)
	}
	if s.Faults["pause"] != 2 || s.Faults["crash"] != 2 {
		t.Errorf("faults %v, want the 2 planned client pauses and 2 crashes", s.Faults)
	}
	skipped := 0
	for _, l := range s.Schedule {
		if strings.Contains(l, "(skipped: ") {
			skipped++
		}
	}
	if skipped == 0 {
		t.Errorf("no fault listed as skipped on the memory store: %v", s.Schedule)
	}
}
