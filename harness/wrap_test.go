package harness_test

import (
	"context"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/stores"
)

// requirePass runs o and fails t unless every scenario passed, logging
// each scenario's counts and naming every checker that did not pass: what
// a test of a correct store (named what) asserts.
func requirePass(t *testing.T, o harness.Options, what string) {
	t.Helper()
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sum.Scenarios {
		t.Logf("%-18s %-7s ops=%d conc=%d faults=%v outcomes=%v %.2fs %s", s.Name, s.Verdict, s.Ops, s.MaxConcurrentBegins, s.Faults, s.Outcomes, s.Seconds, s.Error)
		for _, c := range s.Checkers {
			if c.Verdict != check.Pass {
				t.Errorf("%s/%s: %s: %.400s", s.Name, c.Checker, c.Verdict, c.Detail)
			}
		}
	}
	if sum.Verdict != check.Pass {
		t.Fatalf("%s: verdict %s, want pass; violations %v", what, sum.Verdict, sum.Violations)
	}
}

// wrapStores makes every store o's backend opens the one wrap makes of it:
// how a test runs the harness on a store with a bug of its own making.
func wrapStores(o *harness.Options, wrap func(stores.Store) stores.Store) {
	open := o.Backend.Open
	o.Backend.Open = func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
		s, err := open(ctx, addr, cfg)
		if err != nil {
			return nil, err
		}
		return wrap(s), nil
	}
}
