package scenario_test

import (
	"slices"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// TestStressScenario: the stress scenario drives the correct embedded
// stores with pairs of clients racing on fresh keys, records every call,
// and passes every checker; its findings give the rate, the measured
// capacity and their ratio. (No rate is asserted: speed is measured in
// benchmarks and runs, not in unit tests.)
func TestStressScenario(t *testing.T) {
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			s := harnesstest.RunOne(t, harnesstest.Options(t, backend, stores.Correct, "stress"))
			if s.Verdict != check.Pass {
				t.Fatalf("verdict %s: %s %v", s.Verdict, s.Error, s.Violations)
			}
			for _, f := range []string{"stress_calls_per_s", "stress_capacity_calls_per_s", "stress_percent_of_capacity"} {
				if s.Findings[f] <= 0 {
					t.Errorf("finding %s = %d, want > 0 (findings %v)", f, s.Findings[f], s.Findings)
				}
			}
			// Pairs race on every order: one claims, the other waits (409)
			// and then replays.
			for _, o := range []string{"claimed", "completed", "replay"} {
				if s.Outcomes[o] == 0 {
					t.Errorf("no %s outcome in the stress history: %v", o, s.Outcomes)
				}
			}
		})
	}
}

// TestAllLeavesOutOnRequest: `all` runs every scenario but the ones that
// run only when named; naming one still finds it.
func TestAllLeavesOutOnRequest(t *testing.T) {
	if slices.Contains(scenario.Default(), "stress") {
		t.Errorf("all includes stress: %v", scenario.Default())
	}
	if !slices.Contains(scenario.Names(), "stress") {
		t.Errorf("stress is not a known scenario: %v", scenario.Names())
	}
	if len(scenario.Default()) != len(scenario.Names())-1 {
		t.Errorf("all leaves out %d scenarios, want only stress", len(scenario.Names())-len(scenario.Default()))
	}
}
