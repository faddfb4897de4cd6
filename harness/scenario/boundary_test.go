package scenario_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// TestSchedCrashLandsOnTheBoundary: on a manual clock (memory, sqlite),
// sched-crash asks for the crashed owner's claim at exactly LockTTL (taken
// over), one millisecond short of it (409) and one past it (taken over),
// and the correct store passes; the stale-boundary mutant answers 409 at
// exactly LockTTL, and linearizability fails it.
func TestSchedCrashLandsOnTheBoundary(t *testing.T) {
	for _, name := range []string{"memory", "sqlite"} {
		for _, variant := range []string{stores.Correct, "stale-boundary"} {
			t.Run(name+"/"+variant, func(t *testing.T) {
				o := harnesstest.Options(t, name, variant, "sched-crash")
				o.Keys = 3
				sum, err := harness.Run(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				s := sum.Scenarios[0]
				sc, _ := scenario.Lookup("sched-crash")
				ttl := o.LockTTLFor(sc)
				seen := beginsByAge(s.History().Ops())
				t.Logf("%s: %s; answers by the claim's age: %v", variant, s.Verdict, seen)
				if !slices.Contains(seen[ttl-time.Millisecond], stores.InFlight) {
					t.Errorf("no 409 one millisecond short of LockTTL %v: %v", ttl, seen)
				}
				if !slices.Contains(seen[ttl+time.Millisecond], stores.Claimed) {
					t.Errorf("no takeover one millisecond past LockTTL %v: %v", ttl, seen)
				}
				atTTL := seen[ttl]
				if variant == stores.Correct {
					if s.Verdict != check.Pass {
						t.Fatalf("the correct store: %s %v", s.Verdict, s.Violations)
					}
					if !slices.Contains(atTTL, stores.Claimed) || slices.Contains(atTTL, stores.InFlight) {
						t.Errorf("at exactly LockTTL %v the correct store answered %v, want takeovers only", ttl, atTTL)
					}
					return
				}
				if !slices.Contains(atTTL, stores.InFlight) {
					t.Errorf("at exactly LockTTL %v the mutant answered %v, want a 409", ttl, atTTL)
				}
				if s.Verdict != check.Fail || !slices.ContainsFunc(s.Violations, func(v check.Violation) bool { return v.Checker == check.Linearizable }) {
					t.Errorf("the mutant: %s %v, want a linearizability failure", s.Verdict, s.Violations)
				}
			})
		}
	}
}

// beginsByAge lists the answers of the Begins of a key that was claimed,
// by the age of the key's latest claim on the caller's clock (the requests'
// Now) when they were asked, in call order. A Begin that overlaps another
// Begin's claim of the key is left out: the scheduler may run two takers
// at once, and the one that loses answers 409 at any age, rightly.
func beginsByAge(ops []history.Op) map[time.Duration][]stores.Outcome {
	out := map[time.Duration][]stores.Outcome{}
	keyed, order := history.ByKey(ops)
	for _, k := range order {
		kops := slices.SortedStableFunc(slices.Values(keyed[k]), func(a, b history.Op) int { return cmp.Compare(a.Call, b.Call) })
		racesAClaim := func(op history.Op) bool {
			return slices.ContainsFunc(kops, func(o history.Op) bool {
				return o.Call != op.Call && o.Input.Kind == models.Begin && o.IsClaim() && o.Call < op.Return && op.Call < o.Return
			})
		}
		var claimed time.Time
		for _, op := range kops {
			if op.Input.Kind != models.Begin || op.Output.Unknown {
				continue
			}
			if !claimed.IsZero() && !racesAClaim(op) {
				age := op.Input.Now.Sub(claimed)
				out[age] = append(out[age], op.Output.Decision.Outcome)
			}
			if op.IsClaim() {
				claimed = op.Input.Now
			}
		}
	}
	return out
}
