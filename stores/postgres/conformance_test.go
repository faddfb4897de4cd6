package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
)

func conformanceFactory(dsn string) idemtest.Factory {
	return idemtest.Factory{Name: "postgres", Clock: stores.ServerClock,
		Open: func(cfg stores.Config) (stores.Store, error) {
			s, err := New(context.Background(), dsn, cfg)
			if err != nil {
				return nil, err
			}
			return s, nil
		}}
}

// TestModel runs the conformance suite (model test and scenarios) on a real Postgres, then shows that
// it fails on the mutants it can see without concurrency.
func TestModel(t *testing.T) {
	dsn := testDSN(t)
	t.Run("correct", func(t *testing.T) { idemtest.Run(t, conformanceFactory(dsn)) })
	for _, m := range []string{"unfenced-complete", "no-fingerprint", "token-reuse", "no-takeover"} {
		t.Run(m, func(t *testing.T) {
			if msg := idemtest.ExpectFailure(t, conformanceFactory(dsn), m); !strings.Contains(msg, "model forbids") {
				t.Fatalf("mutant %s: failure does not come from the model:\n%s", m, msg)
			}
		})
	}
}
