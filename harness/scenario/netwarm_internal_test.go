package scenario

import (
	"context"
	"errors"
	"testing"

	"github.com/idemcheck/idemcheck/stores"
)

// warmStore claims every key, and answers every save and release with
// err.
type warmStore struct {
	stores.Store
	err error
}

func (warmStore) Begin(context.Context, stores.Request) (stores.Decision, error) {
	return stores.Decision{Outcome: stores.Claimed, Token: "t"}, nil
}
func (w warmStore) Complete(context.Context, stores.KeyRef, stores.Token, stores.Response) error {
	return w.err
}
func (w warmStore) Release(context.Context, stores.KeyRef, stores.Token) error { return w.err }

// TestNetWarmTakesFencedAsAnAnswer: a warm-up save refused as fenced (its
// lease ran out on the way: a short LockTTL on a loaded machine, a store
// with lease-bound writes) is an answer, and the warm-up is done; any
// other error stops the scenario.
func TestNetWarmTakesFencedAsAnAnswer(t *testing.T) {
	ctx := context.Background()
	if err := netWarm(ctx, warmStore{err: errors.Join(stores.ErrFenced, errors.New("the lease ran out"))}, 0); err != nil {
		t.Errorf("a fenced warm-up save: %v", err)
	}
	if err := netWarm(ctx, warmStore{err: errors.New("connection reset")}, 0); err == nil {
		t.Error("a failed warm-up save passed")
	}
}
