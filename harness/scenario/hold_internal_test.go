package scenario

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// gatedStore holds every Begin until open, as a primary whose commits
// wait for a standby (or a machine too busy for the calls' deadline)
// acknowledges no claim.
type gatedStore struct {
	stores.Store
	open atomic.Bool
}

func (g *gatedStore) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	for !g.open.Load() {
		select {
		case <-ctx.Done():
			return stores.Decision{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return g.Store.Begin(ctx, req)
}

// TestHoldForAcknowledged: a replicated fault is held until the store
// acknowledged a claim sent during it, up to as long again, and a round
// in which none was acknowledged says so: a failover round beside the
// test suite, every call past its deadline, acknowledged nothing and
// lost nothing, and the asynchronous-replication demo was not caught.
func TestHoldForAcknowledged(t *testing.T) {
	cfg := stores.Config{LockTTL: 250 * time.Millisecond, Retention: time.Minute}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedStore{Store: mem}
	env := NewEnv(Setup{Name: "failover", Store: g, Config: cfg, Clients: 2, Keys: 2, Seed: 1, RandSeed: 1})
	ctx := context.Background()
	l := &load{env: env}
	stop := l.start(ctx, func(int) *workload.Client { return env.timedClient() }, 20*time.Millisecond)
	defer stop()

	cut := time.Now()
	holdForAcknowledged(ctx, env, l, cut, 200*time.Millisecond, "the gate was shut")
	if held := time.Since(cut); held < 200*time.Millisecond {
		t.Errorf("held %v with nothing acknowledged, want the whole 200ms", held)
	}
	if notes := strings.Join(env.schedule, "\n"); !strings.Contains(notes, "no claim sent while the gate was shut") {
		t.Errorf("no note of a round that acknowledged nothing: %q", notes)
	}

	env.schedule = nil
	cut = time.Now()
	go func() {
		time.Sleep(100 * time.Millisecond)
		g.open.Store(true)
	}()
	holdForAcknowledged(ctx, env, l, cut, time.Minute, "the gate was shut")
	if !l.freshSince(cut) {
		t.Fatal("returned before a claim sent during the hold was acknowledged")
	}
	if held := time.Since(cut); held > 30*time.Second {
		t.Errorf("held %v: it did not stop at the first acknowledged claim", held)
	}
	if notes := strings.Join(env.schedule, "\n"); !strings.Contains(notes, "held") {
		t.Errorf("no note of the extra hold: %q", notes)
	}

	env.schedule = nil
	cut = time.Now()
	time.Sleep(50 * time.Millisecond) // the gate is open: claims are acknowledged at once
	if !l.waitFresh(ctx, cut, time.Minute) {
		t.Fatal("no claim acknowledged with the gate open")
	}
	holdForAcknowledged(ctx, env, l, cut, time.Minute, "the gate was shut")
	if len(env.schedule) != 0 {
		t.Errorf("a note where a claim was acknowledged in time: %q", env.schedule)
	}
}
