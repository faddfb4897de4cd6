package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// conformanceFactory builds Postgres stores the way a third party's test
// would: Open against the server's DSN, OpenAt against any other address
// (the harness's proxy in front of it) with the same namespace, and the
// network nemesis of harness/servers, so that network and lost-reply run
// for it as for the built-in backend.
func conformanceFactory(dsn string) idemtest.Factory {
	openAt := func(addr string, cfg stores.Config) (stores.Store, error) {
		s, err := New(context.Background(), addr, cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return idemtest.Factory{Name: "postgres", Clock: stores.ServerClock,
		Open:    func(cfg stores.Config) (stores.Store, error) { return openAt(dsn, cfg) },
		Addr:    dsn,
		OpenAt:  openAt,
		Network: servers.Network("postgres"),
	}
}

// TestModel runs the conformance suite (model test and scenarios) on a real Postgres, then shows that
// it fails on the mutants it can see without concurrency.
func TestModel(t *testing.T) {
	dsn := testDSN(t)
	f := conformanceFactory(dsn)
	idemtest.Require(t, f, "network", "lost-reply")
	start := time.Now()
	t.Run("correct", func(t *testing.T) { idemtest.Run(t, f) })
	t.Logf("idemtest.Run on postgres: %s", time.Since(start).Round(time.Millisecond))
	for _, m := range []string{"unfenced-complete", "no-fingerprint", "token-reuse", "no-takeover"} {
		t.Run(m, func(t *testing.T) {
			if msg := idemtest.ExpectFailure(t, conformanceFactory(dsn), m); !strings.Contains(msg, "model forbids") {
				t.Fatalf("mutant %s: failure does not come from the model:\n%s", m, msg)
			}
		})
	}
}
