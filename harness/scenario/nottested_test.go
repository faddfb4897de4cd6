package scenario_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// TestTakeoverSaysWhenNoneHappened: on a store that never takes a stale
// claim over (the memory store's no-takeover mutant), the takeover
// scenario could not test any owner's late save or release against a
// takeover, and its notes say so, naming how many orders. (On the correct
// store a loaded machine may delay the takers past the owner's longest
// pause, and the note is then right: only the verdict is asked of it.)
// The crash scenario says the same of its crashed owners' claims.
func TestTakeoverSaysWhenNoneHappened(t *testing.T) {
	for _, sc := range []string{"takeover", "crash"} {
		for _, variant := range []string{stores.Correct, "no-takeover"} {
			o := harnesstest.Options(t, "memory", variant, sc)
			sum, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			s := sum.Scenarios[0]
			var said string
			for _, n := range s.Notes {
				if strings.Contains(n, "owner's claim over") {
					said = n
				}
			}
			switch {
			case variant == stores.Correct && s.Verdict != check.Pass:
				t.Errorf("%s, correct store: %s %s %v", sc, s.Verdict, s.Error, s.Violations)
			case variant != stores.Correct && !strings.Contains(said, fmt.Sprintf("%d of %d orders", o.Keys, o.Keys)):
				t.Errorf("%s, %s: notes %q; want one saying no claim of the %d orders was taken over", sc, variant, s.Notes, o.Keys)
			}
		}
	}
}

// TestRaceSaysOneClientRacesNothing: at --clients 1 each key's order has
// one client, and the race scenario says it raced no key, rather than
// pass as if it had.
func TestRaceSaysOneClientRacesNothing(t *testing.T) {
	for _, clients := range []int{1, 2} {
		o := harnesstest.Options(t, "memory", stores.Correct, "race")
		o.Clients = clients
		s := harnesstest.RunOne(t, o)
		if s.Verdict != check.Pass {
			t.Fatalf("%d clients: %s %s %v", clients, s.Verdict, s.Error, s.Violations)
		}
		said := strings.Contains(strings.Join(s.Notes, "\n"), "no key was raced")
		if said != (clients == 1) {
			t.Errorf("%d clients: notes %q", clients, s.Notes)
		}
	}
}

// TestSchedTakeoverSaysWhenNoneHappened: a seed whose sched-takeover
// episodes let no claim go stale under a live owner took nothing over,
// and its pass says the fencing of stale owners was not tested (seed 6
// on one key, on the memory store's manual clock); one that took a
// claim over (seed 1) says nothing of it.
func TestSchedTakeoverSaysWhenNoneHappened(t *testing.T) {
	for seed, want := range map[int64]bool{6: true, 1: false} {
		o := harnesstest.Options(t, "memory", stores.Correct, "sched-takeover")
		o.Keys, o.Seed = 1, seed
		s := harnesstest.RunOne(t, o)
		said := slices.ContainsFunc(s.Notes, func(n string) bool { return strings.Contains(n, "no Begin took a stale claim over") })
		if s.Verdict != check.Pass || said != want {
			t.Errorf("seed %d: %s, notes %q; want the note %v", seed, s.Verdict, s.Notes, want)
		}
	}
}
