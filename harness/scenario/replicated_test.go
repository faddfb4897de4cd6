//go:build !race

// Servers only: under -race harnesstest provisions none (see its package comment).

package scenario_test

import (
	"context"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/redis"
)

// TestFailoverReplicatedRedis: on one Redis primary with a replica, the
// failover scenario (one seed) passes on the synchronous store, records
// the lag and failover windows, and fails on the asynchronous
// configuration, which loses acknowledged claims. (`make replicated-5`
// runs failover and partition on both backends and five seeds.)
func TestFailoverReplicatedRedis(t *testing.T) {
	o := harnesstest.ReplicatedOptions(t, "redis-replicated", stores.Correct, "failover")
	for _, tc := range []struct {
		variant string
		want    check.Verdict
	}{{stores.Correct, check.Pass}, {"redis-async-replication", check.Fail}} {
		o.Variant = tc.variant
		sum, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == check.Pass {
			harnesstest.KeepOnFailure(t, sum)
		}
		s := sum.Scenarios[0]
		harnesstest.Log(t, s)
		if s.Verdict != tc.want {
			t.Errorf("%s: verdict %s, want %s (%v)", tc.variant, s.Verdict, tc.want, sum.Violations)
		}
		for _, k := range []history.FaultKind{history.FaultStandbyLag, history.FaultFailover} {
			if s.Faults[string(k)] != 1 {
				t.Errorf("%s: %d %s windows recorded, want 1 (%v)", tc.variant, s.Faults[string(k)], k, s.Faults)
			}
		}
	}
}
