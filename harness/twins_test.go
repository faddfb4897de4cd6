package harness_test

import (
	"context"
	"sync"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// paramsDedupe is a store with a bug nobody listed: it deduplicates by the
// request's parameters, as if they named the operation. A Begin whose
// tenant already has a done record with the same fingerprint, under any
// key, is answered that record's response.
type paramsDedupe struct {
	stores.Store
	mu   sync.Mutex
	fp   map[stores.KeyRef]string      // a claimed key's fingerprint
	done map[[2]string]stores.Response // (tenant, fingerprint) → answer
}

func (s *paramsDedupe) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	s.mu.Lock()
	r, ok := s.done[[2]string{req.Tenant, req.Fingerprint}]
	s.mu.Unlock()
	if ok {
		return stores.Decision{Outcome: stores.Replay, Response: r, DecidedAt: req.Now}, nil
	}
	d, err := s.Store.Begin(ctx, req)
	if err == nil && d.Outcome == stores.Claimed {
		s.mu.Lock()
		s.fp[req.KeyRef] = req.Fingerprint
		s.mu.Unlock()
	}
	return d, err
}

func (s *paramsDedupe) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	err := s.Store.Complete(ctx, key, tok, resp)
	if err == nil {
		s.mu.Lock()
		s.done[[2]string{key.Tenant, s.fp[key]}] = resp
		s.mu.Unlock()
	}
	return err
}

// TestParamsDedupingStoreIsCaught: two orders with the same parameters
// under different keys (the workload's twins) are two operations; a store
// that answers the second with the first one's answer fails, in the
// scenarios that run many keys of a tenant at once. Before orders had
// twins every order's parameters were its own, and this store passed.
func TestParamsDedupingStoreIsCaught(t *testing.T) {
	for _, sc := range []string{"key-space", "race"} {
		t.Run(sc, func(t *testing.T) {
			t.Parallel()
			o := harnesstest.Options(t, "memory", stores.Correct, sc)
			wrapStores(&o, func(s stores.Store) stores.Store {
				return &paramsDedupe{Store: s, fp: map[stores.KeyRef]string{}, done: map[[2]string]stores.Response{}}
			})
			sum, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Verdict != check.Fail {
				t.Fatalf("a store that deduplicates by parameters: %s, want fail", sum.Verdict)
			}
			v := sum.Violations[0]
			t.Logf("caught by %s on %s: %s", v.Checker, v.Key, v.Detail)
		})
	}
}
