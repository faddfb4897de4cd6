package harness_test

import (
	"testing"

	"github.com/idemcheck/idemcheck/harness/harnesstest"
)

// TestScheduledRunsAreDeterministic: the same seed gives the same trace of
// every sched-* scenario, byte for byte, in 10 runs of 10 on the
// in-process and the file backends (harnesstest.Deterministic). The
// server backends' runs are harness/scenario's
// TestScheduledRunsAreDeterministicOnServers, without -race.
func TestScheduledRunsAreDeterministic(t *testing.T) {
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			harnesstest.Deterministic(t, backend, 10, 2)
		})
	}
}
