package idemtest_test

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
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

// erringInvalid is the memory store whose calls with an invalid key fail
// with an error that decides nothing: every every-th of them (a lossy
// link, which drops such calls as it drops any), or all of them with
// every 1 (a store that never answers one as the contract says).
type erringInvalid struct {
	stores.Store
	every int64
	n     *atomic.Int64
}

func (s erringInvalid) err(k stores.KeyRef) error {
	if stores.ValidateKey(k) != nil && s.n.Add(1)%s.every == 0 {
		return errors.New("read tcp: i/o timeout")
	}
	return nil
}

func (s erringInvalid) Begin(ctx context.Context, r stores.Request) (stores.Decision, error) {
	if err := s.err(r.KeyRef); err != nil {
		return stores.Decision{}, err
	}
	return s.Store.Begin(ctx, r)
}

func (s erringInvalid) Complete(ctx context.Context, k stores.KeyRef, tok stores.Token, r stores.Response) error {
	if err := s.err(k); err != nil {
		return err
	}
	return s.Store.Complete(ctx, k, tok, r)
}

func (s erringInvalid) Release(ctx context.Context, k stores.KeyRef, tok stores.Token) error {
	if err := s.err(k); err != nil {
		return err
	}
	return s.Store.Release(ctx, k, tok)
}

func erringInvalidFactory(every int64) idemtest.Factory {
	var n atomic.Int64
	return idemtest.Factory{Name: "memory-erring-invalid", Clock: stores.CallerClock, WaitsAnnounced: true,
		Open: func(cfg stores.Config) (stores.Store, error) {
			s, err := memory.New(cfg)
			if err != nil {
				return nil, err
			}
			return erringInvalid{Store: s, every: every, n: &n}, nil
		}}
}

// TestInvalidKeyCallLostPasses: a call with an invalid key that fails
// with an error deciding nothing (a lossy link drops it as any other)
// ends its case, as any such call does: a helper's correct store behind
// a lossy link failed the model test with "want the invalid-key error,
// got i/o timeout". A store that never refuses an invalid key as the
// contract says still fails.
func TestInvalidKeyCallLostPasses(t *testing.T) {
	idemtest.ModelTest(t, erringInvalidFactory(200))
	if os.Getenv(childEnv) == "1" {
		return
	}
	wantSuiteFails(t, "TestInvalidKeyNeverRefused", "--- FAIL: TestInvalidKeyNeverRefused", "refused none of")
}

// TestInvalidKeyNeverRefused is TestInvalidKeyCallLostPasses's child: a
// store every call of which with an invalid key fails with a timeout.
func TestInvalidKeyNeverRefused(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestInvalidKeyCallLostPasses")
	}
	idemtest.ModelTest(t, erringInvalidFactory(1))
}
