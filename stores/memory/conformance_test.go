package memory_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

func factory() idemtest.Factory {
	return idemtest.Factory{Name: "memory", Clock: stores.CallerClock,
		Open: func(cfg stores.Config) (stores.Store, error) {
			s, err := memory.New(cfg)
			if err != nil {
				return nil, err
			}
			return s, nil
		}}
}

// TestConformance: the reference store passes the whole suite.
func TestConformance(t *testing.T) {
	idemtest.Run(t, factory())
}

// needsMore are the memory store's mutants the sequential model test
// cannot see: a race between a read and the write that depends on it
// (harness/sched finds those), a retention boundary only a scheduled
// episode lands on, or a leak only a strict retention check calls a bug.
var needsMore = []string{"select-then-insert", "blind-takeover", "takeover-by-state", "stale-overwrite", "created-in-seconds", "never-expire"}

// TestModelCatchesMutants shows the model test has teeth: pointed at each
// mutant it can see without concurrency, it fails with a shrunk history.
func TestModelCatchesMutants(t *testing.T) {
	for _, m := range memory.Mutants {
		if slices.Contains(needsMore, m) {
			continue
		}
		t.Run(m, func(t *testing.T) {
			msg := idemtest.ExpectFailure(t, factory(), m)
			if !strings.Contains(msg, "model forbids") {
				t.Fatalf("mutant %s: failure does not come from the model:\n%s", m, msg)
			}
		})
	}
}
