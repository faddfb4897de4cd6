package harness_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// lockedBegin holds one lock of its own across the Begin of the store it
// wraps, failpoints included: a client parked inside Begin keeps it, and
// the next client's Begin waits for it without announcing the wait
// (faults.Wait), as a store with a lock in process memory does.
type lockedBegin struct {
	stores.Store
	mu *sync.Mutex
}

func (s lockedBegin) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil { // a round trip, with the lock held
		return stores.Decision{}, err
	}
	return s.Store.Begin(ctx, req)
}

// TestWrongWaitsAnnouncedIsSaid: a store that declares it announces its
// waits (the memory backend's declaration) but waits on a lock of its own
// without saying so passes (a wrong declaration costs time, never a
// verdict), and its pass says that clients were taken to be blocked and
// names the declaration: before, a suite ran many times slower with
// nothing said.
func TestWrongWaitsAnnouncedIsSaid(t *testing.T) {
	t.Parallel() // its time is the scheduler's bound, waited out
	o := harnesstest.Options(t, "memory", stores.Correct, "sched-race")
	o.Keys, o.Seed = 1, 3
	if !o.Backend.WaitsAnnounced {
		t.Fatal("the memory backend does not declare WaitsAnnounced")
	}
	var mu sync.Mutex
	wrapStores(&o, func(s stores.Store) stores.Store { return lockedBegin{s, &mu} })
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := sum.Scenarios[0]
	blocked := 0
	for _, e := range s.Episodes {
		blocked += e.Blocked
	}
	t.Logf("%s: %s, %d blocked, notes %q", s.Name, s.Verdict, blocked, s.Notes)
	if blocked == 0 {
		t.Fatal("no client was taken to be blocked behind the lock: the test proves nothing (another seed?)")
	}
	said := false
	for _, n := range s.Notes {
		said = said || strings.Contains(n, "WaitsAnnounced")
	}
	if !said {
		t.Errorf("%d blocked clients, and no note names the declaration: %q", blocked, s.Notes)
	}
}
