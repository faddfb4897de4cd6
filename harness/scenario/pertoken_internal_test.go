package scenario

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// perKeyTokens is a correct store that numbers its tokens per key (v1,
// v2, …, a version counter), as the contract allows: a token is unique
// within its key, and every key's first is "v1". It wraps the memory
// store, translating its tokens; a token it never handed out for the key
// reaches the store as one it never made.
type perKeyTokens struct {
	stores.Store
	mu    sync.Mutex
	n     map[stores.KeyRef]int
	inner map[stores.KeyRef]map[stores.Token]stores.Token
}

func (s *perKeyTokens) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	d, err := s.Store.Begin(ctx, req)
	if err != nil || d.Token == "" {
		return d, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[req.KeyRef]++
	t := stores.Token(fmt.Sprintf("v%d", s.n[req.KeyRef]))
	if s.inner[req.KeyRef] == nil {
		s.inner[req.KeyRef] = map[stores.Token]stores.Token{}
	}
	s.inner[req.KeyRef][t] = d.Token
	d.Token = t
	return d, nil
}

func (s *perKeyTokens) token(k stores.KeyRef, t stores.Token) stores.Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.inner[k][t]; ok {
		return in
	}
	return "not-handed-out:" + t
}

func (s *perKeyTokens) Complete(ctx context.Context, k stores.KeyRef, t stores.Token, r stores.Response) error {
	return s.Store.Complete(ctx, k, s.token(k, t), r)
}

func (s *perKeyTokens) Release(ctx context.Context, k stores.KeyRef, t stores.Token) error {
	return s.Store.Release(ctx, k, s.token(k, t))
}

// TestAbuseWithPerKeyTokens: the abuse scenario finishes, and passes, on
// a correct store whose tokens are numbered per key. Its "other key's
// token" was, for every key, the key's own live token "v1": the store
// rightly took it, the owner's save was then fenced, and every run on
// such a store ended undecided.
func TestAbuseWithPerKeyTokens(t *testing.T) {
	cfg := stores.Config{LockTTL: 250 * time.Millisecond, Retention: time.Minute}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := &perKeyTokens{Store: mem, n: map[stores.KeyRef]int{}, inner: map[stores.KeyRef]map[stores.Token]stores.Token{}}
	env := abuseOn(t, st, cfg, 2, 4)
	for _, r := range check.Run(check.Evidence{Hist: env.Hist, Ledger: env.Ledger, Model: check.ModelFor(stores.CallerClock, cfg, stores.Semantics{}),
		ProbeClient: -1, LinTimeout: 10 * time.Second}) {
		if r.Verdict == check.Fail {
			t.Errorf("%s: %s", r.Checker, r.Detail)
		}
	}
}
