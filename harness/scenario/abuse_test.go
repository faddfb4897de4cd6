package scenario_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// TestAbuseSavesPastRetention: abuse with many keys on Redis, whose
// records expire at the retention, under a retention of a second: the
// owners' saves come after it and are fenced (the record is gone), which
// is the store's right. The run must pass, counting them, not end
// undecided with "the owner could not save" (100 keys at load 40 did at
// the default retention).
func TestAbuseSavesPastRetention(t *testing.T) {
	o := harnesstest.Options(t, "redis", stores.Correct)
	o.Scenarios, o.Keys, o.Retention = []string{"abuse"}, 300, time.Second
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := sum.Scenarios[0]
	if s.Verdict != check.Pass {
		t.Fatalf("abuse of 300 keys at a 1 s retention: %s %s %v", s.Verdict, s.Error, s.Violations)
	}
	t.Logf("abuse: %d calls, faults %v, %.1fs", s.Ops, s.Faults, s.Seconds)
}
