package scenario

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// oneAtATime answers one claim or release at a time, each after d.
type oneAtATime struct {
	stores.Store
	mu sync.Mutex
	d  time.Duration
}

func (s *oneAtATime) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	time.Sleep(s.d)
	return s.Store.Begin(ctx, req)
}

func (s *oneAtATime) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	time.Sleep(s.d)
	return s.Store.Release(ctx, key, tok)
}

// TestMeetingWaveFollowsTheStoresPace: a fast store gets every key at
// once; a store that answers one call at a time, fast enough for the
// capped warm batch (warmAtOnce calls) but not for every key's calls,
// gets them in smaller waves (the batch stands for every key's calls at
// the pace it was answered, not for all of them), and at most
// maxMeetingWaves of them; a store too slow for one key's calls gets
// every key at once.
func TestMeetingWaveFollowsTheStoresPace(t *testing.T) {
	cfg := stores.Config{LockTTL: time.Second, Retention: time.Hour, Variant: stores.Correct}
	env := func(st stores.Store, keys int) *Env {
		return NewEnv(Setup{Name: "skew", Store: st, Config: cfg, Clients: 2, Keys: keys, Seed: 1, RandSeed: 1})
	}
	mem := func() stores.Store {
		m, err := memory.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	budget := 200 * time.Millisecond
	ctx := context.Background()
	// The memory store is fast against a budget of a minute: its timed
	// batch (warmAtOnce calls, standing for 400) would have to take 9.6 s.
	// Against 200 ms it had 32 ms, which a deschedule on CI's loaded
	// machine can outlast, and the store then rightly got waves.
	if w := meetingWave(ctx, env(mem(), 200), 2, time.Minute); w != 200 {
		t.Errorf("the memory store: waves of %d keys, want every one of 200 at once", w)
	}
	// warmAtOnce claims and their releases, 1 ms each: about 128 ms,
	// inside the budget; every key's 400 claims and releases, about 800.
	slow := &oneAtATime{Store: mem(), d: time.Millisecond}
	w := meetingWave(ctx, env(slow, 200), 2, budget)
	if w < 1 || w >= 200 {
		t.Errorf("a store that answers one call a millisecond: waves of %d keys of 200, want fewer than all and at least one", w)
	}
	t.Logf("one call a millisecond: waves of %d keys", w)
	// At the most keys, no more than maxMeetingWaves waves.
	if w := meetingWave(ctx, env(slow, 10_000), 2, budget); w != 10_000/maxMeetingWaves {
		t.Errorf("10,000 keys: waves of %d keys, want %d (%d waves at most)", w, 10_000/maxMeetingWaves, maxMeetingWaves)
	}
	// A store that does not answer one key's calls in the budget meets no
	// one in waves either: every key at once, as fast as before.
	hopeless := &oneAtATime{Store: mem(), d: 100 * time.Millisecond}
	if w := meetingWave(ctx, env(hopeless, 2), 2, 100*time.Millisecond); w != 2 {
		t.Errorf("a store slower than the budget for one key: waves of %d keys, want both at once", w)
	}
}
