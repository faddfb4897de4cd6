package harness

import (
	"context"
	"sync"

	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// How the scheduled phase runs its scenarios side by side: on a
// server-clock store, while their episode slots add up to at most
// scenario.EpisodesAtOnce; on a caller-clock store one at a time.

// scheduledSlots is the share of the scheduled phase's budget
// (scenario.EpisodesAtOnce) the scheduled scenario sc takes while it
// runs: on a server-clock store its episodes' slots
// (scenario.Scenario.Slots), whose time is mostly the ticks' real waits,
// so scenarios whose slots fit the budget run at once and load the server
// no more than one scenario with that many slots; on a caller-clock store
// the whole budget, one at a time (there a tick is a manual clock's move,
// and the phase takes milliseconds).
func (o Options) scheduledSlots(sc scenario.Scenario) int {
	if o.Backend.Clock != stores.ServerClock {
		return scenario.EpisodesAtOnce
	}
	return max(1, min(sc.Slots(o.Keys, o.LockTTLFor(sc)), scenario.EpisodesAtOnce))
}

// slotBudget hands out the scheduled phase's slots: take waits until n
// are free (or ctx ends), give returns them.
type slotBudget struct {
	mu      sync.Mutex
	free    int
	changed chan struct{} // closed, and replaced, on every give
}

func newSlotBudget(n int) *slotBudget { return &slotBudget{free: n, changed: make(chan struct{})} }

// take waits until n slots are free and takes them; false if ctx ended
// first (nothing taken).
func (b *slotBudget) take(ctx context.Context, n int) bool {
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return true
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// give returns n slots taken before.
func (b *slotBudget) give(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	close(b.changed)
	b.changed = make(chan struct{})
}
