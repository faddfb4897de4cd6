package scenario_test

import (
	"context"
	"sync"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// TestScheduledScenariosShareTheirSlots: on a server-clock store the
// scheduled scenarios run side by side while their episodes' slots
// (scenario.Scenario.Slots) add up to at most scenario.EpisodesAtOnce, never
// more; on a caller-clock store one at a time. At 12 keys the scheduled
// scenarios' slots add up to more than the budget, so it is what holds
// some back.
func TestScheduledScenariosShareTheirSlots(t *testing.T) {
	scheduled := harnesstest.ScheduledNames()
	for _, tc := range []struct {
		backend    string
		keys       int
		sideBySide bool
		overBudget bool // the slots of all of them at once exceed the budget
	}{
		{"redis", 12, true, true},
		{"sqlite", 2, false, false},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			o := harnesstest.Options(t, tc.backend, stores.Correct, scheduled...)
			o.Keys = tc.keys
			slots := map[string]int{}
			total := 0
			for _, name := range scheduled {
				sc, _ := scenario.Lookup(name)
				slots[name] = sc.Slots(o.Keys, o.LockTTLFor(sc))
				total += slots[name]
			}
			if tc.overBudget && total <= scenario.EpisodesAtOnce {
				t.Fatalf("the scheduled scenarios' slots add up to %d at %d keys, within the budget of %d: the test would not test it",
					total, o.Keys, scenario.EpisodesAtOnce)
			}
			var mu sync.Mutex
			running := map[string]bool{}
			most, mostSlots := 0, 0
			o.Progress = func(p harness.Progress) {
				mu.Lock()
				defer mu.Unlock()
				if p.Done {
					delete(running, p.Scenario)
					return
				}
				running[p.Scenario] = true
				n := 0
				for name := range running {
					n += slots[name]
				}
				most, mostSlots = max(most, len(running)), max(mostSlots, n)
			}
			sum, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Verdict != check.Pass {
				t.Fatalf("a correct store's scheduled scenarios: %s (%v)", sum.Verdict, sum.Violations)
			}
			t.Logf("%s, %d keys: slots %v; at most %d scenarios and %d slots at once", tc.backend, tc.keys, slots, most, mostSlots)
			switch {
			case tc.sideBySide && most < 2:
				t.Errorf("the scheduled scenarios ran one at a time on a server-clock store, want side by side")
			case !tc.sideBySide && most != 1:
				t.Errorf("%d scheduled scenarios ran at once on a caller-clock store, want one at a time", most)
			}
			if tc.sideBySide && mostSlots > scenario.EpisodesAtOnce {
				t.Errorf("%d episode slots ran at once, more than the budget of %d", mostSlots, scenario.EpisodesAtOnce)
			}
		})
	}
}
