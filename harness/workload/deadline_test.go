package workload

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/stores"
)

// TestUnknownBudget: an order gives up after n attempts of unknown
// outcome, and answers that are definite (a 409, a fenced write, a call
// the store declared not applied) do not count.
func TestUnknownBudget(t *testing.T) {
	giveUp := UnknownBudget(2)
	for _, err := range []error{stores.ErrInFlight, stores.ErrFenced, stores.NotApplied(errors.New("40001"))} {
		if giveUp(err) {
			t.Fatalf("gave up on %v, a definite answer", err)
		}
	}
	if giveUp(context.DeadlineExceeded) {
		t.Fatal("gave up after one unknown outcome, budget 2")
	}
	if !giveUp(context.DeadlineExceeded) {
		t.Fatal("did not give up after two unknown outcomes, budget 2")
	}
}

// slowStore answers every Begin with err, once ctx ends if wait is set
// (a driver that reports the deadline as its own error), else at once.
type slowStore struct {
	stores.Store
	err  error
	wait bool
}

func (s slowStore) Begin(ctx context.Context, _ stores.Request) (stores.Decision, error) {
	if s.wait {
		<-ctx.Done()
	}
	return stores.Decision{}, s.err
}

// TestPastDeadline: an error that comes once the call's deadline has
// passed is marked as the deadline's (history.ErrPastDeadline), its own
// kind and message kept; one that comes before is left as it is, even a
// store's own timeout.
func TestPastDeadline(t *testing.T) {
	timeout := errors.New("read tcp: i/o timeout")
	_, err := WithDeadline(slowStore{err: timeout, wait: true}, 20*time.Millisecond).Begin(context.Background(), stores.Request{})
	if !errors.Is(err, history.ErrPastDeadline) || !errors.Is(err, timeout) {
		t.Errorf("an error past the deadline: %v, want it marked as the deadline's, and still %v", err, timeout)
	}
	for _, early := range []error{stores.NotApplied(errors.New("database is locked")), fmt.Errorf("waited for the lock: %w", context.DeadlineExceeded)} {
		_, err = WithDeadline(slowStore{err: early}, time.Minute).Begin(context.Background(), stores.Request{})
		if errors.Is(err, history.ErrPastDeadline) || err != early {
			t.Errorf("an error before the deadline: %v, want %v as it was", err, early)
		}
	}
}
