package scenario

import (
	"context"
	"strings"
	"sync"
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

// waitingCtx closes waiting the first time Done is asked: a wait (a
// faults.Pause) has begun under it.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
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
	// Beside the verdict (what the round did not test), not only in the
	// fault schedule.
	if notes := strings.Join(env.untested, "\n"); !strings.Contains(notes, "no claim sent while the gate was shut") || !strings.Contains(notes, "not what a lagging standby forgets") {
		t.Errorf("no note of a round that acknowledged nothing: %q", notes)
	}

	// The gate opens once the hold waits (its first pause asks the
	// context), not 100 ms after cut: a deschedule on CI's loaded machine
	// past that could let a claim through before the hold's first look,
	// and it rightly returned at once, with no note.
	env.schedule = nil
	cut = time.Now()
	waiting := &waitingCtx{Context: ctx, waiting: make(chan struct{})}
	go func() {
		<-waiting.waiting
		g.open.Store(true)
	}()
	holdForAcknowledged(waiting, env, l, cut, time.Minute, "the gate was shut")
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
