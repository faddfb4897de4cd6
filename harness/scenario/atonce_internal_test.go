package scenario

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/redis"
)

// openCounter counts the stores a scenario has open at once through its
// OpenAt, and the most it ever had.
type openCounter struct {
	mu         sync.Mutex
	open, most int
	opened     int
}

// counted is a store whose Close the counter sees.
type counted struct {
	stores.Store
	c    *openCounter
	once sync.Once
}

func (s *counted) Close() error {
	s.once.Do(func() {
		s.c.mu.Lock()
		s.c.open--
		s.c.mu.Unlock()
	})
	return s.Store.Close()
}

func (c *openCounter) openAt(b stores.Backend) func(context.Context, string, stores.Config) (stores.Store, error) {
	return func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
		st, err := b.Open(ctx, addr, cfg)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.open++
		c.opened++
		c.most = max(c.most, c.open)
		c.mu.Unlock()
		return &counted{Store: st, c: c}, nil
	}
}

// TestScheduledEpisodesAtOnceAreBounded: on a server-clock store the
// episodes of a scheduled scenario whose ticks would take long one after
// another run in a few slots at once, every slot but the first on a store
// of its own, opened once. Before, every key's episode opened its store at
// once: at 200 keys, with four scenarios side by side, Postgres refused
// connections ("too many clients already") and the refused calls failed a
// correct store's liveness. A scenario without ticks, or with few keys,
// runs its episodes one at a time on the run's store: eight at once, each
// on a new store, Postgres episodes ran past LockTTL between ticks.
func TestScheduledEpisodesAtOnceAreBounded(t *testing.T) {
	addr := servers.AddrForTest(t, "redis")
	b, err := stores.Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Hour, Variant: stores.Correct, Namespace: "atonce"}
	st, err := b.Open(ctx, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tc := range []struct {
		name        string
		keys, slots int
	}{
		{"sched-takeover", 3 * EpisodesAtOnce, 6}, // 24 keys × 2 ticks × 120 ms: 5.76 s, slots of about a second
		{"sched-takeover", 2, 1},
		{"sched-race", 3 * EpisodesAtOnce, 1}, // no ticks
	} {
		if got := episodeSlots(episodeSpecs[tc.name], tc.keys, cfg.LockTTL); got != tc.slots {
			t.Fatalf("%s, %d keys: %d slots, want %d", tc.name, tc.keys, got, tc.slots)
		}
		var c openCounter
		env := NewEnv(Setup{Caps: Caps{Backend: b, Addr: addr, OpenAt: c.openAt(b)}, Name: tc.name,
			Store: st, Config: cfg, Clients: 2, Keys: tc.keys, Seed: 1, RandSeed: 1})
		episodes(tc.name)(ctx, env)
		if len(env.incomplete) > 0 {
			t.Fatalf("%s, %d keys: a correct store's episodes failed: %q", tc.name, tc.keys, env.incomplete)
		}
		if len(env.episodes) != tc.keys {
			t.Fatalf("%s: %d episodes recorded, want %d", tc.name, len(env.episodes), tc.keys)
		}
		if c.opened != tc.slots-1 {
			t.Errorf("%s, %d keys: %d stores opened, want one for each slot but the first (%d)", tc.name, tc.keys, c.opened, tc.slots-1)
		}
		if c.open != 0 {
			t.Errorf("%d episode stores left open", c.open)
		}
		if tc.slots > 2 && c.most < 2 {
			t.Errorf("%s: the slots ran one at a time (at most %d store open), want side by side", tc.name, c.most)
		}
		t.Logf("%s: %d episodes in %d slots, at most %d stores opened at once", tc.name, tc.keys, tc.slots, c.most)
	}
}

// TestEpisodeSlotsAreBounded: however many keys and however long the
// ticks, at most EpisodesAtOnce slots, and never more than the keys.
func TestEpisodeSlotsAreBounded(t *testing.T) {
	spec := episodeSpecs["sched-takeover"]
	if n := episodeSlots(spec, 200, 10*time.Second); n != EpisodesAtOnce {
		t.Errorf("200 keys at LockTTL 10s: %d slots, want %d", n, EpisodesAtOnce)
	}
	if n := episodeSlots(spec, 3, 10*time.Second); n != 3 {
		t.Errorf("3 keys at LockTTL 10s: %d slots, want 3", n)
	}
	if n := episodeSlots(spec, 0, time.Second); n != 1 {
		t.Errorf("no keys: %d slots, want 1", n)
	}
}
