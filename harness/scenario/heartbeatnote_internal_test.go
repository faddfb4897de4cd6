package scenario

import (
	"context"
	"strings"
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
	heartbeat, ok := Lookup("heartbeat")
	if !ok {
		t.Fatal("no heartbeat scenario")
	}
	stopped := time.Now()
	for _, clock := range []func() time.Time{func() time.Time { return stopped }, nil} {
		st, err := lease.New(cfg, clock)
		if err != nil {
			t.Fatal(err)
		}
		const keys = 2
		env := NewEnv(Setup{Name: "heartbeat", Store: st, Config: cfg, Clients: 3, Keys: keys, Seed: 1, RandSeed: 1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		heartbeat.Run(ctx, env)
		cancel()
		notes := strings.Join(env.Record().NotTested, "\n")
		still := clock != nil
		t.Logf("clock stands still %v: notes %q", still, notes)
		switch {
		case still && !strings.Contains(notes, "heartbeat: no client took the stalled owner's claim over") || still && !strings.Contains(notes, ": 2 of 2 orders"):
			t.Errorf("no lease ended, but the notes say %q", notes)
		case !still && notes != "":
			t.Errorf("the stalled owners were taken over, but the notes say %q", notes)
		}
	}
}
