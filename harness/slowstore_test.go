package harness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// slowStore delays every call of the store it wraps by d before passing
// it on, as a loaded machine would: its clients go quiet between
// failpoints for longer than a scheduler's short Block.
type slowStore struct {
	stores.Store
	d time.Duration
}

func (s slowStore) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	time.Sleep(s.d)
	return s.Store.Begin(ctx, req)
}

func (s slowStore) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	time.Sleep(s.d)
	return s.Store.Complete(ctx, key, tok, resp)
}

func (s slowStore) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	time.Sleep(s.d)
	return s.Store.Release(ctx, key, tok)
}

func (s slowStore) Prune(ctx context.Context, now time.Time) (int, error) {
	time.Sleep(s.d)
	return s.Store.Prune(ctx, now)
}

// TestSlowStoreKeepsItsInterleaving: on backends that announce their
// waits (stores.Backend.WaitsAnnounced), the scheduler waits for a quiet
// client instead of taking it to be blocked inside the store. So the same
// seed gives the same trace, byte for byte, with every call slowed by
// 60 ms (past the 40 ms an embedded store's scheduler gave a client that
// does not announce its waits) as at full speed.
func TestSlowStoreKeepsItsInterleaving(t *testing.T) {
	scheduled := []string{"sched-race", "sched-takeover", "sched-crash"}
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			traces := func(delay time.Duration) map[string]string {
				o := harnesstest.Options(t, backend, stores.Correct, scheduled...)
				o.Seed, o.Keys = 7, 1
				if !o.Backend.WaitsAnnounced {
					t.Fatalf("%s does not declare WaitsAnnounced", backend)
				}
				if delay > 0 {
					wrapStores(&o, func(s stores.Store) stores.Store { return slowStore{s, delay} })
				}
				sum, err := harness.Run(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]string{}
				for _, s := range sum.Scenarios {
					if s.History() == nil {
						t.Fatalf("%s: no history (%s %s)", s.Name, s.Verdict, s.Error)
					}
					out[s.Name] = harnesstest.Trace(t, s)
				}
				return out
			}
			fast, slowed := traces(0), traces(60*time.Millisecond)
			for _, name := range scheduled {
				if fast[name] != slowed[name] {
					t.Errorf("%s: the slowed store's trace differs: %s", name, harnesstest.FirstDiff(fast[name], slowed[name]))
				}
			}
		})
	}
}

// TestProgressSaysChecking: once a scenario's workload has ended, its
// progress ticks say it is being checked (its final probe, then its
// checkers), and never running again: on a run of millions of calls that
// phase took a minute, in which the count of calls stood still under a
// line that said "running". Every call of the store waits for two ticks
// after it starts (a tick loads the phase, then reports it), so each of
// the final probe's calls spans a tick that saw the phase: an event, not
// a delay a loaded machine could outrun (15 ms per call once saw no tick
// in the probe under make test's load).
func TestProgressSaysChecking(t *testing.T) {
	o := harnesstest.Options(t, "memory", stores.Correct, "race")
	o.Keys, o.Clients = 3, 2
	var mu sync.Mutex
	ticked := sync.NewCond(&mu)
	var ticks []harness.Progress
	o.Progress, o.ProgressEvery = func(p harness.Progress) {
		mu.Lock()
		defer mu.Unlock()
		ticks = append(ticks, p)
		ticked.Broadcast()
	}, 5*time.Millisecond
	wrapStores(&o, func(s stores.Store) stores.Store {
		return tickedStore{s, func() {
			mu.Lock()
			defer mu.Unlock()
			for n := len(ticks); len(ticks) < n+2; {
				ticked.Wait()
			}
		}}
	})
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != check.Pass {
		t.Fatalf("verdict %s", sum.Verdict)
	}
	mu.Lock()
	defer mu.Unlock()
	checking, ops := 0, 0
	for i, p := range ticks {
		switch {
		case p.Done:
		case p.Checking:
			checking++
		case checking > 0:
			t.Fatalf("tick %d says running after %d said checking: %+v", i, checking, p)
		default:
			ops = max(ops, p.Ops)
		}
	}
	if checking == 0 || ops == 0 {
		t.Fatalf("%d ticks while running (at most %d calls), %d while checking: want some of each", len(ticks)-checking, ops, checking)
	}
}

// tickedStore runs wait before every call of the store it wraps.
type tickedStore struct {
	stores.Store
	wait func()
}

func (s tickedStore) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	s.wait()
	return s.Store.Begin(ctx, req)
}

func (s tickedStore) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	s.wait()
	return s.Store.Complete(ctx, key, tok, resp)
}

func (s tickedStore) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	s.wait()
	return s.Store.Release(ctx, key, tok)
}

func (s tickedStore) Prune(ctx context.Context, now time.Time) (int, error) {
	s.wait()
	return s.Store.Prune(ctx, now)
}
