package idemtest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
)

// expiring is a slow store whose records expire a retention after their
// claim, as Redis's do: a save sent later is fenced, rightly.
type expiring struct {
	stores.Store
	retention time.Duration
	mu        sync.Mutex
	claimed   map[stores.KeyRef]claimAt
}

type claimAt struct {
	at  time.Time
	tok stores.Token
}

func (e *expiring) Begin(ctx context.Context, r stores.Request) (stores.Decision, error) {
	d, err := e.Store.Begin(ctx, r)
	if err == nil && d.Outcome == stores.Claimed {
		e.mu.Lock()
		if _, ok := e.claimed[r.KeyRef]; !ok {
			e.claimed[r.KeyRef] = claimAt{time.Now(), d.Token}
		}
		e.mu.Unlock()
	}
	return d, err
}

func (e *expiring) Complete(ctx context.Context, k stores.KeyRef, tok stores.Token, resp stores.Response) error {
	time.Sleep(60 * time.Millisecond)
	e.mu.Lock()
	c, ok := e.claimed[k]
	expired := ok && time.Since(c.at) >= e.retention
	if expired {
		delete(e.claimed, k) // the next claim starts a new life
	}
	e.mu.Unlock()
	if expired {
		_ = e.Store.Release(ctx, k, c.tok) // the record expired: gone
		return stores.ErrFenced
	}
	return e.Store.Complete(ctx, k, tok, resp)
}

func (e *expiring) Release(ctx context.Context, k stores.KeyRef, tok stores.Token) error {
	time.Sleep(60 * time.Millisecond)
	return e.Store.Release(ctx, k, tok)
}

// TestAbuseSaysWhatAFencedSaveLeftOut: on a slow store whose records
// expire at a 1 s retention, the abuse scenario's owners save past it and
// are rightly fenced, so the calls it makes after a save are never sent;
// the pass says so. It passed saying nothing.
func TestAbuseSaysWhatAFencedSaveLeftOut(t *testing.T) {
	f := tinyFactory(false)
	open := f.Open
	f.Name, f.Retention = "expiring", time.Second
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		s, err := open(cfg)
		return &expiring{Store: s, retention: time.Second, claimed: map[stores.KeyRef]claimAt{}}, err
	}
	t.Setenv("IDEM_RESULTS", t.TempDir())
	sum, _, err := idemtest.CheckScenario(context.Background(), f, "abuse")
	if err != nil {
		t.Fatal(err)
	}
	s := sum.Scenarios[0]
	if s.Verdict == check.Fail {
		t.Fatalf("a correct store failed: %v", s.Violations)
	}
	if !strings.Contains(strings.Join(s.Notes, "\n"), "the calls after a save") {
		t.Errorf("the notes do not say what the fenced saves left out (faults %v):\n%s", s.Faults, strings.Join(s.Notes, "\n"))
	}
}
