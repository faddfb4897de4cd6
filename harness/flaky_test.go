package harness_test

import (
	"context"
	"errors"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// flakyStore is a correct store behind an unreliable link: a share of its
// calls fail before they reach the store (nothing happened), and another
// share reach it, take effect, and lose their answer on the way back (the
// caller gets an error; the claim, save, release or prune happened). The
// contract lets every call end in an error of unknown outcome, so the
// store is still correct and must pass: a verdict against it is a false
// alarm.
type flakyStore struct {
	stores.Store
	mu   sync.Mutex
	rand *rand.Rand
	// before and after are the shares of calls that fail before and
	// after they take effect.
	before, after float64
}

// errFlaky is the error a flaky call returns.
var errFlaky = errors.New("flaky link: no answer")

// call runs f, or not, as the dice say, and reports what the caller sees.
func (s *flakyStore) call(f func() error) error {
	s.mu.Lock()
	p := s.rand.Float64()
	s.mu.Unlock()
	if p < s.before {
		return errFlaky
	}
	err := f()
	if p < s.before+s.after {
		return errors.Join(errFlaky, err)
	}
	return err
}

func (s *flakyStore) Begin(ctx context.Context, req stores.Request) (d stores.Decision, err error) {
	err = s.call(func() error {
		d, err = s.Store.Begin(ctx, req)
		return err
	})
	if err != nil {
		return stores.Decision{}, err
	}
	return d, nil
}

func (s *flakyStore) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	return s.call(func() error { return s.Store.Complete(ctx, key, tok, resp) })
}

func (s *flakyStore) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	return s.call(func() error { return s.Store.Release(ctx, key, tok) })
}

func (s *flakyStore) Prune(ctx context.Context, now time.Time) (n int, err error) {
	err = s.call(func() error {
		n, err = s.Store.Prune(ctx, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// TestFlakyCorrectStorePasses: the correct stores behind a link that
// loses 5% of calls before they act and 5% of answers after, on every
// scenario these backends run (the worker processes open the store
// themselves, unwrapped). Any verdict but pass is a false alarm: the
// checkers must judge a call without an answer as one that may or may not
// have happened.
func TestFlakyCorrectStorePasses(t *testing.T) {
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			o := harnesstest.Options(t, backend, stores.Correct)
			seed := int64(len(backend))
			wrapStores(&o, func(s stores.Store) stores.Store {
				return &flakyStore{Store: s, rand: rand.New(rand.NewSource(seed)), before: 0.05, after: 0.05}
			})
			requirePass(t, o, "a correct store behind a flaky link")
		})
	}
}
