package netfault_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/postgres"
	"github.com/idemcheck/idemcheck/stores/redis"
)

// opener opens a store at an address; both the direct and the proxied
// store of a test share its namespace, so they see the same keys.
type opener func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error)

func TestPostgresThroughProxy(t *testing.T) {
	srv := servers.ForTest(t, servers.Postgres)
	// One pooled connection, so the warm-up call prepares the statements
	// on the very connection whose reply is then lost (pgx prepares a
	// statement on first use, in a round trip of its own).
	dsn := srv.Addr
	if strings.Contains(dsn, "?") {
		dsn += "&pool_max_conns=1"
	} else {
		dsn += "?pool_max_conns=1"
	}
	throughProxy(t, "postgres", dsn, func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
		return postgres.New(ctx, addr, cfg)
	})
}

func TestRedisThroughProxy(t *testing.T) {
	srv := servers.ForTest(t, servers.Redis)
	throughProxy(t, "redis", "redis://"+srv.Addr+"/0?pool_size=1", func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
		return redis.New(ctx, addr, cfg)
	})
}

// throughProxy shows on a real server what each fault does to a store's
// calls: a lost reply leaves a committed claim (or save) behind an error;
// a reset leaves nothing; latency only slows.
func throughProxy(t *testing.T, backend, addr string, open opener) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	cfg := stores.Config{LockTTL: time.Minute, Retention: time.Hour, Namespace: "netfault_" + hex.EncodeToString(b[:])}

	p, via, err := netfault.StartFor("test-"+backend, backend, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	direct, err := open(ctx, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	lossy, err := open(ctx, via, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lossy.Close()

	key := func(k string) stores.KeyRef { return stores.KeyRef{Tenant: "t", Key: k} }
	req := func(k string) stores.Request {
		return stores.Request{KeyRef: key(k), Fingerprint: "fp", Now: time.Now()}
	}
	// warm runs Begin, Complete and Release once on the proxied store's
	// (single) connection, so the call under test is one round trip.
	n := 0
	warm := func(t *testing.T) {
		t.Helper()
		for _, release := range []bool{false, true} {
			n++
			k := "warm" + string(rune('a'+n))
			d, err := lossy.Begin(ctx, req(k))
			if err != nil || d.Outcome != stores.Claimed {
				t.Fatalf("warm-up Begin through the proxy: %v %v", d.Outcome, err)
			}
			if release {
				err = lossy.Release(ctx, key(k), d.Token)
			} else {
				err = lossy.Complete(ctx, key(k), d.Token, stores.Response{Status: 201, Body: "w"})
			}
			if err != nil {
				t.Fatalf("warm-up write through the proxy: %v", err)
			}
		}
	}

	t.Run("lost reply of a claim", func(t *testing.T) {
		warm(t)
		if err := p.LoseReplies(); err != nil {
			t.Fatal(err)
		}
		_, err := lossy.Begin(ctx, req("claim-lost"))
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Fatal("Begin got its reply through a proxy that loses replies")
		}
		t.Logf("client saw: %v", err)
		// The server committed the claim: the key is in flight.
		d, err := direct.Begin(ctx, req("claim-lost"))
		if err != nil || d.Outcome != stores.InFlight {
			t.Errorf("after the lost reply the server has %v (%v), want in-flight: the claim must have committed", d.Outcome, err)
		}
	})

	t.Run("lost reply of a save", func(t *testing.T) {
		d, err := lossy.Begin(ctx, req("save-lost"))
		if err != nil || d.Outcome != stores.Claimed {
			t.Fatalf("Begin after Heal: %v %v", d.Outcome, err)
		}
		warm(t)
		if err := p.LoseReplies(); err != nil {
			t.Fatal(err)
		}
		resp := stores.Response{Status: 201, Body: "charged once"}
		err = lossy.Complete(ctx, key("save-lost"), d.Token, resp)
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Fatal("Complete got its reply through a proxy that loses replies")
		}
		// The save committed: a retry gets the replay.
		r, err := direct.Begin(ctx, req("save-lost"))
		if err != nil || r.Outcome != stores.Replay || r.Response != resp {
			t.Errorf("after the lost reply the server answers %v %v (%v), want the replay of the save", r.Outcome, r.Response, err)
		}
	})

	t.Run("reset", func(t *testing.T) {
		warm(t)
		if err := p.ResetConnections(); err != nil {
			t.Fatal(err)
		}
		_, err := lossy.Begin(ctx, req("reset"))
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Fatal("Begin succeeded through a proxy that resets connections")
		}
		// The request never reached the server: the key is free.
		d, err := direct.Begin(ctx, req("reset"))
		if err != nil || d.Outcome != stores.Claimed {
			t.Errorf("after a reset the server answers %v (%v), want claimed: nothing should have reached it", d.Outcome, err)
		}
	})

	t.Run("latency", func(t *testing.T) {
		if err := p.Latency(300*time.Millisecond, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		d, err := lossy.Begin(ctx, req("slow"))
		el := time.Since(start)
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
		if err != nil || d.Outcome != stores.Claimed {
			t.Fatalf("Begin under latency: %v %v", d.Outcome, err)
		}
		if el < 250*time.Millisecond {
			t.Errorf("Begin under 300±50ms latency took %v", el)
		}
	})

	// The store recovers once healed.
	if d, err := lossy.Begin(ctx, req("after")); err != nil || d.Outcome != stores.Claimed {
		t.Errorf("Begin after Heal: %v %v", d.Outcome, err)
	}
	hits := p.Hits()
	// Exactly the two calls lost their replies; the reset window may also
	// have caught a reconnect of the pool.
	if hits[netfault.KindLostReply] != 2 || hits[netfault.KindReset] < 1 || hits[netfault.KindLatency] < 1 {
		t.Errorf("hits %v, want 2 lost-reply, at least 1 reset and 1 latency", hits)
	}
	t.Logf("hits %v, switches %v", hits, p.Switches())
}
