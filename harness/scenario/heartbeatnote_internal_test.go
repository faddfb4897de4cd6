package scenario

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/lease"
)

// TestHeartbeatSaysWhenNoStalledOwnerWasTakenOver: on a lease store whose
// clock stands still, no lease ends, so no client takes a stalled owner's
// claim over, and the heartbeat scenario says that its late heartbeats and
// saves were not tested against a takeover, for every order; on the lease
// store with a running clock it says nothing.
func TestHeartbeatSaysWhenNoStalledOwnerWasTakenOver(t *testing.T) {
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Minute}
	stopped := time.Now()
	for _, clock := range []func() time.Time{func() time.Time { return stopped }, nil} {
		st, err := lease.New(cfg, clock)
		if err != nil {
			t.Fatal(err)
		}
		wantNote(t, notesOf(t, "heartbeat", st, cfg, 3, 2), "heartbeat: no client took the stalled owner's claim over", 2, clock != nil)
	}
}
