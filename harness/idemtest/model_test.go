package idemtest_test

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

func memoryFactory() idemtest.Factory {
	return idemtest.Factory{Name: "memory", Clock: stores.CallerClock,
		Open: func(cfg stores.Config) (stores.Store, error) { return memory.New(cfg) }}
}

func TestModelMemory(t *testing.T) {
	idemtest.ModelTest(t, memoryFactory())
}

// TestModelCatchesMutants shows the model test has teeth: pointed at each
// mutant it can see without concurrency, it fails with a shrunk history.
func TestModelCatchesMutants(t *testing.T) {
	for _, m := range []string{"unfenced-complete", "unfenced-release", "no-fingerprint", "token-reuse", "no-takeover", "short-retention"} {
		t.Run(m, func(t *testing.T) {
			msg := idemtest.ExpectFailure(t, memoryFactory(), m)
			if !strings.Contains(msg, "model forbids") {
				t.Fatalf("mutant %s: failure does not come from the model:\n%s", m, msg)
			}
		})
	}
}
