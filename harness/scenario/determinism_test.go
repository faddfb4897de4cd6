package scenario_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/idemcheck/idemcheck/harness/harnesstest"
)

// TestScheduledRunsAreDeterministicOnServers: the same seed gives the same
// trace of every sched-* scenario on Postgres and Redis
// (harnesstest.Deterministic), whose ticks wait out a real LockTTL: 3 runs
// on one key by default, IDEM_DETERMINISM_RUNS on two (`make determinism`
// runs 10). The in-process and file backends' runs are harness's
// TestScheduledRunsAreDeterministic, under -race.
func TestScheduledRunsAreDeterministicOnServers(t *testing.T) {
	runs, keys := 3, 1
	if v := os.Getenv("IDEM_DETERMINISM_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("IDEM_DETERMINISM_RUNS=%q: want a number of runs, 2 or more", v)
		}
		runs, keys = n, 2
	}
	for _, backend := range []string{"postgres", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel() // their ticks wait in real time on the servers
			harnesstest.Deterministic(t, backend, runs, keys)
		})
	}
}
