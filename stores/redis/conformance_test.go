package redis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/redis"
)

func factory(addr string) idemtest.Factory {
	return idemtest.Factory{Name: "redis", Clock: stores.ServerClock,
		Open: func(cfg stores.Config) (stores.Store, error) {
			s, err := redis.New(context.Background(), addr, cfg)
			if err != nil {
				return nil, err
			}
			return s, nil
		}}
}

// TestModel runs the conformance suite (model test and scenarios) on a real Redis, then shows that it
// fails on the mutants it can see without concurrency.
func TestModel(t *testing.T) {
	srv := servers.ForTest(t, servers.Redis)
	t.Run("correct", func(t *testing.T) { idemtest.Run(t, factory(srv.Addr)) })
	for _, m := range []string{"unfenced-complete", "no-fingerprint", "token-reuse", "no-takeover"} {
		t.Run(m, func(t *testing.T) {
			if msg := idemtest.ExpectFailure(t, factory(srv.Addr), m); !strings.Contains(msg, "model forbids") {
				t.Fatalf("mutant %s: failure does not come from the model:\n%s", m, msg)
			}
		})
	}
}
