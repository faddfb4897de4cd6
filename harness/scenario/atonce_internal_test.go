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
// episodes of a scheduled scenario run side by side, each on a store of
// its own, but never more than episodesAtOnce at a time. Before, every
// key's episode opened its store at once: at 200 keys, with four
// scenarios side by side, Postgres refused connections ("too many clients
// already") and the refused calls failed a correct store's liveness.
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
	var c openCounter
	keys := 3 * episodesAtOnce
	env := NewEnv(Setup{Caps: Caps{Backend: b, Addr: addr, OpenAt: c.openAt(b)}, Name: "sched-race",
		Store: st, Config: cfg, Clients: 2, Keys: keys, Seed: 1, RandSeed: 1})
	episodes("sched-race")(ctx, env)
	if len(env.incomplete) > 0 {
		t.Fatalf("a correct store's episodes failed: %q", env.incomplete)
	}
	if len(env.episodes) != keys || c.opened != keys {
		t.Fatalf("%d episodes recorded and %d stores opened, want %d of each", len(env.episodes), c.opened, keys)
	}
	if c.open != 0 {
		t.Errorf("%d episode stores left open", c.open)
	}
	if c.most > episodesAtOnce {
		t.Errorf("%d episode stores open at once, want at most %d", c.most, episodesAtOnce)
	}
	if c.most < 2 {
		t.Errorf("the episodes ran one at a time (at most %d store open), want side by side", c.most)
	}
	t.Logf("%d episodes, at most %d at once", keys, c.most)
}
