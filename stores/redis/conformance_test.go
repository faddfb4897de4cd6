package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/redis"
)

func factory(addr string) idemtest.Factory {
	openAt := func(at string, cfg stores.Config) (stores.Store, error) {
		s, err := redis.New(context.Background(), at, cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return idemtest.Factory{Name: "redis", Clock: stores.ServerClock,
		Open: func(cfg stores.Config) (stores.Store, error) { return openAt(addr, cfg) }}
}

// withFaults gives the factory what lets every fault run against its
// store, as a third party's test can: the server's address, a way to open
// the store through another (the network proxy's), the network nemesis,
// and control of the container the test started (pause, kill, restart).
func withFaults(t *testing.T, f idemtest.Factory, srv *servers.Server) idemtest.Factory {
	ctl, err := servers.NewFaults(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	f.Addr, f.Network, f.Server = srv.Addr, servers.Network("redis"), ctl
	f.OpenAt = func(addr string, cfg stores.Config) (stores.Store, error) {
		s, err := redis.New(context.Background(), addr, cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return f
}

// TestModel runs the conformance suite (model test and scenarios) on a real Redis, then shows that it
// fails on the mutants it can see without concurrency.
func TestModel(t *testing.T) {
	srv := servers.ForTest(t, servers.Redis)
	f := withFaults(t, factory(srv.Addr), srv)
	idemtest.Require(t, f, "network", "lost-reply", "store-faults", "chaos")
	start := time.Now()
	t.Run("correct", func(t *testing.T) { idemtest.Run(t, f) })
	t.Logf("idemtest.Run on redis, every fault: %s", time.Since(start).Round(time.Millisecond))
	for _, m := range []string{"unfenced-complete", "no-fingerprint", "token-reuse", "no-takeover"} {
		t.Run(m, func(t *testing.T) {
			if msg := idemtest.ExpectFailure(t, factory(srv.Addr), m); !strings.Contains(msg, "model forbids") {
				t.Fatalf("mutant %s: failure does not come from the model:\n%s", m, msg)
			}
		})
	}
}
