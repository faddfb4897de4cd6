package idemtest_test

import (
	"context"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// fencedInvalid is the memory store checking keys only in Begin: a
// Complete or Release of a key no claim can have is answered as fenced
// (no claim of that token), not as invalid.
type fencedInvalid struct{ stores.Store }

func (s fencedInvalid) Complete(ctx context.Context, k stores.KeyRef, tok stores.Token, r stores.Response) error {
	if stores.ValidateKey(k) != nil {
		return stores.ErrFenced
	}
	return s.Store.Complete(ctx, k, tok, r)
}

func (s fencedInvalid) Release(ctx context.Context, k stores.KeyRef, tok stores.Token) error {
	if stores.ValidateKey(k) != nil {
		return stores.ErrFenced
	}
	return s.Store.Release(ctx, k, tok)
}

// TestInvalidKeyWriteFencedPasses: the model test accepts a write to an
// invalid key refused as fenced, as the README says (a helper's correct
// store failed it with "want the invalid-key error, got fenced").
func TestInvalidKeyWriteFencedPasses(t *testing.T) {
	idemtest.ModelTest(t, idemtest.Factory{Name: "memory-fenced-invalid", Clock: stores.CallerClock, WaitsAnnounced: true,
		Open: func(cfg stores.Config) (stores.Store, error) {
			s, err := memory.New(cfg)
			if err != nil {
				return nil, err
			}
			return fencedInvalid{s}, nil
		}})
}
