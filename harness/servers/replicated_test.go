package servers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	_ "github.com/idemcheck/idemcheck/stores/redis"
)

// TestReplicatedFailover: on each replicated backend, claims acknowledged
// by the correct (synchronous) store survive a failover to the standby;
// while the standby is cut off the synchronous store acknowledges nothing;
// and the asynchronous configuration acknowledges claims the standby never
// got, which the failover forgets (each key can be claimed afresh).
func TestReplicatedFailover(t *testing.T) {
	for _, kind := range []servers.Kind{servers.Postgres, servers.Redis} {
		t.Run(string(kind), func(t *testing.T) {
			// A topology of its own (containers, networks, router) per
			// backend: the two run side by side, as many at once as
			// -parallel lets (GOMAXPROCS by default).
			t.Parallel()
			top := servers.TopologyForTest(t, kind)
			t.Logf("topology started in %v", top.Started.Round(time.Millisecond))
			ctx := context.Background()
			b, err := stores.Lookup(string(kind) + "-replicated")
			if err != nil {
				t.Fatal(err)
			}
			open := func(variant, ns string) stores.Store {
				cfg := stores.Config{LockTTL: time.Minute, Retention: time.Hour, Variant: variant, Namespace: ns}
				st, err := b.Open(ctx, top.Addr, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			}
			req := func(i int) stores.Request {
				return stores.Request{KeyRef: stores.KeyRef{Tenant: "repl", Key: fmt.Sprintf("k%02d", i)}, Fingerprint: "fp", Now: time.Now()}
			}
			const n = 5
			claimAll := func(st stores.Store) {
				for i := 0; i < n; i++ {
					d, err := st.Begin(ctx, req(i))
					if err != nil || d.Outcome != stores.Claimed {
						t.Fatalf("claim %d: %+v, %v", i, d, err)
					}
				}
			}
			// afterFailover counts the keys claimed afresh: forgotten.
			afterFailover := func(st stores.Store) (lost int) {
				for i := 0; i < n; i++ {
					if beginAfterFailover(t, st, req(i)).Outcome == stores.Claimed {
						lost++
					}
				}
				return lost
			}
			async := map[servers.Kind]string{servers.Postgres: "postgres-async-replication", servers.Redis: "redis-async-replication"}[kind]
			syncNS, asyncNS := fmt.Sprintf("rs_%d", time.Now().UnixNano()%1e9), fmt.Sprintf("ra_%d", time.Now().UnixNano()%1e9)
			syncSt, asyncSt := open(stores.Correct, syncNS), open(async, asyncNS)
			// After the failover the synchronous Redis store waits for a
			// replica there is not yet: its keys are read without WAIT.
			syncReader := open(async, syncNS)

			claimAll(syncSt) // acknowledged once the standby has them
			if err := top.LagStandby(ctx); err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			d, err := syncSt.Begin(cctx, req(n))
			cancel()
			if err == nil {
				t.Errorf("synchronous store acknowledged %v while its standby was cut off", d.Outcome)
			}
			claimAll(asyncSt) // acknowledged by the primary alone
			if err := top.Failover(ctx); err != nil {
				t.Fatal(err)
			}
			// Promotion is idempotent: an attempt cut short by its
			// timeout may have promoted the standby, and the retry must
			// not fail forever on a primary.
			if err := servers.PromoteForTest(ctx, kind, top.Addr); err != nil {
				t.Errorf("promoting the promoted standby again: %v", err)
			}
			if lost := afterFailover(syncReader); lost != 0 {
				t.Errorf("synchronous store: %d of %d acknowledged claims lost in the failover", lost, n)
			}
			if lost := afterFailover(asyncSt); lost != n {
				t.Errorf("asynchronous store: %d of %d claims made while the standby was cut off lost, want all", lost, n)
			}
			if kind == servers.Postgres {
				secondFailover(t, top, syncSt, req)
			}
		})
	}
}

// secondFailover claims keys without pause while Ready makes the promoted
// primary a new standby (until then the primary acknowledges commits
// alone), fails over again once Ready returns, and wants every claim
// acknowledged meanwhile to survive: Ready must not return before the new
// standby has flushed what the primary acknowledged alone.
func secondFailover(t *testing.T, top *servers.Topology, st stores.Store, req func(int) stores.Request) {
	ctx := context.Background()
	var (
		mu    sync.Mutex
		acked []int
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 100; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			d, err := st.Begin(cctx, req(i))
			cancel()
			if err == nil && d.Outcome == stores.Claimed {
				mu.Lock()
				acked = append(acked, i)
				mu.Unlock()
			}
		}
	}()
	err := top.Ready(ctx)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) == 0 {
		t.Fatal("no claim was acknowledged while the new standby was made")
	}
	if err := top.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, i := range acked {
		if beginAfterFailover(t, st, req(i)).Outcome == stores.Claimed {
			lost++
		}
	}
	t.Logf("%d claims acknowledged while the new standby was made", len(acked))
	if lost > 0 {
		t.Errorf("%d of %d claims acknowledged while the new standby was made were lost in the second failover", lost, len(acked))
	}
}

// beginAfterFailover asks for r's key until the store, reconnecting
// through the router, answers (5 s at most).
func beginAfterFailover(t *testing.T, st stores.Store, r stores.Request) stores.Decision {
	t.Helper()
	var (
		d   stores.Decision
		err error
	)
	for try := 0; try < 50; try++ {
		if d, err = st.Begin(context.Background(), r); err == nil {
			return d
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("after a failover, %s: %v", r.KeyRef, err)
	return d
}
