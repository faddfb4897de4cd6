package scenario_test

import (
	"context"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	_ "github.com/idemcheck/idemcheck/stores/redis"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// TestRaceOnEveryBackend checks, on each backend (Postgres and Redis
// on real servers), that the race scenario really races and that the two
// classic mutants are caught. (Each store's own tests run every scenario on
// its correct variant through idemtest.Run.)
func TestRaceOnEveryBackend(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres", "redis"} {
		t.Run(name, func(t *testing.T) {
			o := harnesstest.Options(t, name, stores.Correct)
			o.Scenarios = []string{"race"}
			sum, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			s := sum.Scenarios[0]
			if s.Verdict != check.Pass {
				t.Errorf("%s/race: %s: %v", name, s.Verdict, s.Violations)
			}
			if s.MaxConcurrentBegins < 3 {
				t.Errorf("%s/race: only %d Begins at once on a key", name, s.MaxConcurrentBegins)
			}
			for _, m := range []struct{ variant, scenario string }{{"select-then-insert", "race"}, {"unfenced-complete", "takeover"}} {
				// Three rounds: one catches the mutant even on a loaded machine,
				// where a round's timing can let a takeover race go unseen.
				o.Variant, o.Scenarios, o.Count = m.variant, []string{m.scenario}, 3
				sum, err := harness.Run(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				if sum.Verdict != check.Fail {
					t.Errorf("%s: mutant %s survived %s", name, m.variant, m.scenario)
				} else {
					t.Logf("%s: %s killed by %s on %s", name, m.variant, sum.Violations[0].Checker, sum.Violations[0].Key)
				}
			}
		})
	}
}
