package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/sqlite"
)

// factory opens each store on a fresh file in the test's directory.
func factory(t *testing.T) idemtest.Factory {
	dir := t.TempDir()
	var n atomic.Int64
	return idemtest.Factory{Name: "sqlite", Clock: stores.CallerClock,
		Open: func(cfg stores.Config) (stores.Store, error) {
			s, err := sqlite.New(context.Background(), filepath.Join(dir, fmt.Sprintf("model-%d.db", n.Add(1))), cfg)
			if err != nil {
				return nil, err
			}
			return s, nil
		}}
}

// TestConformance: the whole suite (model test and scenarios) on real
// SQLite files.
func TestConformance(t *testing.T) {
	idemtest.Run(t, factory(t))
}

// TestModelCatchesMutants: the model test fails, shrunk, on each mutant
// that misbehaves without concurrency.
func TestModelCatchesMutants(t *testing.T) {
	for _, m := range []string{"unfenced-complete", "unfenced-release", "no-fingerprint", "token-reuse", "no-takeover", "short-retention"} {
		t.Run(m, func(t *testing.T) {
			if msg := idemtest.ExpectFailure(t, factory(t), m); !strings.Contains(msg, "model forbids") {
				t.Fatalf("mutant %s: failure does not come from the model:\n%s", m, msg)
			}
		})
	}
}
