package workload

import (
	"context"
	"errors"
	"testing"

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
