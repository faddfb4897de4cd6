package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// testTakeover: a claim older than LockTTL is taken over once; the old owner
// is fenced; the new owner's answer is replayed.
func testTakeover(t *testing.T, addr string) {
	t.Parallel()
	s := open(t, addr, stores.Correct, short, long)
	ctx := context.Background()
	a := begin(t, s, req("k", "f"))
	last := stillLive(t, a, begin(t, s, req("k", "f")))
	time.Sleep(past)
	b := begin(t, s, req("k", "f"))
	want(t, b, stores.Claimed)
	if !b.Takeover || b.Token == a.Token {
		t.Fatalf("takeover: %+v (old token %s)", b, a.Token)
	}
	if got := b.DecidedAt.Sub(last.DecidedAt); got < short {
		t.Errorf("took over after %v < LockTTL %v", got, short)
	}
	owner := stillLive(t, b, begin(t, s, req("k", "f"))) // the new claim is live
	want(t, begin(t, s, req("k", "g")), stores.Mismatch)
	if err := s.Complete(ctx, ref("k"), a.Token, stores.Response{Status: 200, Body: "stale"}); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("stale complete: %v, want ErrFenced", err)
	}
	if err := s.Release(ctx, ref("k"), a.Token); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("stale release: %v, want ErrFenced", err)
	}
	if err := s.Complete(ctx, ref("k"), owner.Token, stores.Response{Status: 200, Body: "new"}); err != nil {
		t.Fatal(err)
	}
	if got := begin(t, s, req("k", "f")); got.Outcome != stores.Replay || got.Response.Body != "new" {
		t.Errorf("after takeover: %+v", got)
	}
	// A done key is never taken over, however old.
	time.Sleep(past)
	want(t, begin(t, s, req("k", "f")), stores.Replay)
}

// stillLive wants d, a Begin with the fingerprint of the claim c made on
// c's key and no other call between, to find c's claim live (InFlight),
// and returns c, the key's claim. On a loaded machine (CI: a 0.5-3 s
// deschedule) d can reach the server a LockTTL (300 ms) or more after c
// by the server's clock (DecidedAt); c's claim is then stale and d must
// take it over: stillLive wants that instead, and returns d.
func stillLive(t *testing.T, c, d stores.Decision) stores.Decision {
	t.Helper()
	if d.DecidedAt.Sub(c.DecidedAt) < short {
		want(t, d, stores.InFlight)
		return c
	}
	t.Logf("asked %v after the claim (a loaded machine): a takeover is due", d.DecidedAt.Sub(c.DecidedAt))
	if d.Outcome != stores.Claimed || !d.Takeover || d.Token == c.Token {
		t.Fatalf("a LockTTL after the claim: %+v, want a takeover (old token %s)", d, c.Token)
	}
	return d
}

// testConcurrentTakeover: 32 clients race to take over one stale claim;
// one wins. A loaded machine may run a client so late that the winner's
// own claim went stale meanwhile (LockTTL is short): a second takeover
// is then right, and only one decided within a LockTTL of the last is
// counted against the store: two wins both asked for and answered
// within less than a LockTTL.
func testConcurrentTakeover(t *testing.T, addr string) {
	t.Parallel()
	s := open(t, addr, stores.Correct, short, long)
	const keys, clients = 5, 32
	for k := 0; k < keys; k++ {
		begin(t, s, req(fmt.Sprint("k", k), "f"))
	}
	time.Sleep(past)
	type win struct{ call, ret time.Time }
	var mu sync.Mutex
	var wins [keys][]win
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < keys; k++ {
				call := time.Now()
				d, err := s.Begin(context.Background(), req(fmt.Sprint("k", k), "f"))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Outcome == stores.Claimed {
					if !d.Takeover {
						t.Errorf("claimed without takeover: %+v", d)
					}
					mu.Lock()
					wins[k] = append(wins[k], win{call, time.Now()})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for k, ws := range wins {
		if len(ws) == 0 {
			t.Errorf("key %d never taken over", k)
		}
		sort.Slice(ws, func(i, j int) bool { return ws[i].call.Before(ws[j].call) })
		for i := 1; i < len(ws); i++ {
			// Both decided between the first call and the last return.
			last := ws[i].ret
			if ws[i-1].ret.After(last) {
				last = ws[i-1].ret
			}
			if gap := last.Sub(ws[i-1].call); gap < short {
				t.Errorf("key %d taken over twice within %v, inside LockTTL %v", k, gap, short)
			}
		}
	}
}
