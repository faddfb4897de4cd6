package harness

import (
	"context"
	"testing"
)

// TestSlotBudget: take hands out slots while they last, waits for a give
// when they do not, and gives up, taking nothing, when its context ends.
func TestSlotBudget(t *testing.T) {
	b := newSlotBudget(8)
	ctx := context.Background()
	if !b.take(ctx, 5) || !b.take(ctx, 3) {
		t.Fatal("8 slots of 8 not handed out")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if b.take(cancelled, 1) {
		t.Fatal("a slot handed out from an empty budget")
	}
	got := make(chan bool)
	go func() { got <- b.take(ctx, 4) }()
	b.give(3) // not enough yet: the taker waits on
	b.give(5)
	if !<-got {
		t.Fatal("the taker of 4 got nothing once 8 were free")
	}
	if b.free != 4 {
		t.Fatalf("%d slots free, want 4", b.free)
	}
}
