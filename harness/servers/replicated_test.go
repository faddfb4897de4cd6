package servers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	_ "github.com/idemcheck/idemcheck/stores/redis"
)

// startTopology starts a replicated topology for t, skipping as ForTest
// does when Docker or the image is missing.
func startTopology(t *testing.T, kind servers.Kind) *servers.Topology {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	top, err := servers.StartReplicated(ctx, kind, servers.Options{Logf: t.Logf})
	if err != nil {
		if errors.Is(err, servers.ErrUnavailable) && !servers.Required() {
			t.Skipf("%v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := top.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return top
}

// TestReplicatedFailover: on each replicated backend, claims acknowledged
// by the correct (synchronous) store survive a failover to the standby;
// while the standby is cut off the synchronous store acknowledges nothing;
// and the asynchronous configuration acknowledges claims the standby never
// got, which the failover forgets (each key can be claimed afresh).
func TestReplicatedFailover(t *testing.T) {
	for _, kind := range []servers.Kind{servers.Postgres, servers.Redis} {
		t.Run(string(kind), func(t *testing.T) {
			top := startTopology(t, kind)
			t.Logf("topology started in %v", top.Started.Round(time.Millisecond))
			ctx := context.Background()
			b, err := stores.Lookup(string(kind) + "-replicated")
			if err != nil {
				t.Fatal(err)
			}
			open := func(variant string) stores.Store {
				cfg := stores.Config{LockTTL: time.Minute, Retention: time.Hour, Variant: variant, Namespace: fmt.Sprintf("repl_%d", time.Now().UnixNano()%1e9)}
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
					var d stores.Decision
					var err error
					for try := 0; try < 50; try++ { // the store reconnects through the router
						if d, err = st.Begin(ctx, req(i)); err == nil {
							break
						}
						time.Sleep(100 * time.Millisecond)
					}
					if err != nil {
						t.Fatalf("after failover, key %d: %v", i, err)
					}
					if d.Outcome == stores.Claimed {
						lost++
					}
				}
				return lost
			}

			sync := open(stores.Correct)
			claimAll(sync)
			if err := top.LagStandby(ctx); err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			d, err := sync.Begin(cctx, req(n))
			cancel()
			if err == nil {
				t.Errorf("synchronous store acknowledged %v while its standby was cut off", d.Outcome)
			}
			if err := top.Failover(ctx); err != nil {
				t.Fatal(err)
			}
			// Synchronous Redis waits for a replica: the failover
			// manager starts a new standby before clients are served.
			if err := top.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			if lost := afterFailover(sync); lost != 0 {
				t.Errorf("synchronous store: %d of %d acknowledged claims lost in the failover", lost, n)
			}

			if err := top.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			variant := map[servers.Kind]string{servers.Postgres: "postgres-async-replication", servers.Redis: "redis-async-replication"}[kind]
			async := open(variant)
			if err := top.LagStandby(ctx); err != nil {
				t.Fatal(err)
			}
			claimAll(async) // acknowledged by the primary alone
			if err := top.Failover(ctx); err != nil {
				t.Fatal(err)
			}
			if lost := afterFailover(async); lost != n {
				t.Errorf("asynchronous store: %d of %d claims made while the standby was cut off lost, want all", lost, n)
			}
		})
	}
}
