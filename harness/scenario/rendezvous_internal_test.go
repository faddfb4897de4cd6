package scenario

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
)

// TestReadRendezvousHoldsUntilAllHaveRead: with a wait no test outlasts,
// no client held after its read goes on before every client of the key
// has read, and a client passing any other failpoint is not held.
func TestReadRendezvousHoldsUntilAllHaveRead(t *testing.T) {
	const n = 3
	r := newReadRendezvous(n)
	r.wait = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.first(faults.BeginAfterSelect, nil).Hit(ctx, faults.BeforeRoundTrip); err != nil || ctx.Err() != nil {
		t.Fatalf("a client at another failpoint was held: %v %v", err, ctx.Err())
	}
	came := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_ = r.first(faults.BeginAfterSelect, nil).Hit(ctx, faults.BeginAfterSelect)
			r.mu.Lock()
			came[i] = r.came
			r.mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("the clients were not let go once all had read")
	}
	for i, c := range came {
		if c != n {
			t.Errorf("client %d went on when %d of %d had read", i, c, n)
		}
	}
	if r.apart() {
		t.Error("the clients were held together, but apart says they were not")
	}
}

// TestReadRendezvousHasOneDeadline: the wait ends at one deadline set by
// the first client to read; a client that reads after it has passed is
// not held a wait of its own (a store holding a lock there would
// otherwise cost the key a wait per client).
func TestReadRendezvousHasOneDeadline(t *testing.T) {
	r := newReadRendezvous(3)
	r.wait = time.Millisecond
	ctx := context.Background()
	_ = r.first(faults.BeginAfterSelect, nil).Hit(ctx, faults.BeginAfterSelect)
	first := r.deadline
	if first.IsZero() {
		t.Fatal("the first read set no deadline")
	}
	r.wait = time.Hour // a wait of its own would hold the next client an hour
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.first(faults.BeginAfterSelect, nil).Hit(ctx, faults.BeginAfterSelect)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a client that read after the deadline was held")
	}
	if !r.deadline.Equal(first) {
		t.Errorf("the deadline moved from %v to %v", first, r.deadline)
	}
}
