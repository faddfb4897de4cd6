package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/storetest"
)

// mutantTTL is the LockTTL of the scenarios that need a stale claim; the
// server's clock cannot be faked, so they sleep past it.
const mutantTTL = 200 * time.Millisecond

// mutantTries is how many times TestMutants runs a mutant's schedule
// before it says the mutant did not show its bug.
const mutantTries = 3

func sleepPastTTL() { time.Sleep(mutantTTL + 50*time.Millisecond) }

// A scenario drives one store through a short, deterministic schedule and
// reports whether the mutant's bug happened, and what was seen.
type scenario func(t *testing.T, s *Store) (bug bool, seen string)

// scenarios has one per mutant. Each is run on the mutant, where the bug
// must happen, and on the correct store, where it must not.
var scenarios = map[string]scenario{
	// Twelve clients race for a key, round after round: under REPEATABLE
	// READ some losers are refused (40001) where 409 is due.
	RepeatableRead: func(t *testing.T, s *Store) (bool, string) {
		_, refused := raceRounds(t, s, 20)
		return refused > 0, fmt.Sprintf("%d race losers refused as not applied", refused)
	},
	// Two clients both read "no row" (held together at the failpoint
	// between the SELECT and the upsert), then both claim.
	"select-then-insert": func(t *testing.T, s *Store) (bool, string) {
		ctx := faults.WithHandler(ctxT(t), barrier(2, faults.BeginAfterSelect))
		ds, errs := beginAll(ctx, s, []stores.Request{req("k", "fp"), req("k", "fp")}, nil)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		return storetest.TwoOwners(ds[0], ds[1], mutantTTL)
	},

	// A pauses past LockTTL, B takes over, A's late save lands.
	"unfenced-complete": func(t *testing.T, s *Store) (bool, string) {
		a := mustBegin(t, s, req("k", "fp"))
		sleepPastTTL()
		b := mustBegin(t, s, req("k", "fp"))
		wantOutcome(t, b, stores.Claimed)
		err := s.Complete(ctxT(t), ref("k"), a.Token, stores.Response{Status: 200, Body: "from A"})
		if err != nil && !errors.Is(err, stores.ErrFenced) {
			t.Fatal(err)
		}
		return err == nil, "stale Complete: " + errString(err)
	},

	// A pauses past LockTTL, B takes over, A's late release deletes B's
	// claim, so C claims a key B is still working on.
	"unfenced-release": func(t *testing.T, s *Store) (bool, string) {
		a := mustBegin(t, s, req("k", "fp"))
		sleepPastTTL()
		wantOutcome(t, mustBegin(t, s, req("k", "fp")), stores.Claimed)
		err := s.Release(ctxT(t), ref("k"), a.Token)
		if err != nil && !errors.Is(err, stores.ErrFenced) {
			t.Fatal(err)
		}
		c := mustBegin(t, s, req("k", "fp"))
		return err == nil && c.Outcome == stores.Claimed, "stale Release: " + errString(err) + "; then " + c.Outcome.String()
	},

	// The key is reused with other parameters and replays the first answer.
	"no-fingerprint": func(t *testing.T, s *Store) (bool, string) {
		a := mustBegin(t, s, req("k", "amount=10"))
		if err := s.Complete(ctxT(t), ref("k"), a.Token, stores.Response{Status: 200, Body: "charged 10"}); err != nil {
			t.Fatal(err)
		}
		d := mustBegin(t, s, req("k", "amount=99"))
		return d.Outcome == stores.Replay, d.Outcome.String()
	},

	// Two takers of one stale claim, held together between their read and
	// their write, both win.
	// A's claim goes stale; T reads it and stops before its write; A
	// releases, O (other parameters) claims, and O's claim goes stale;
	// T's write takes over O's claim: both hold claims, of two
	// fingerprints. (The correct Begin is one statement: T takes A's
	// claim over, A's release is fenced, and O is told 422.)
	"takeover-by-state": func(t *testing.T, s *Store) (bool, string) {
		a := mustBegin(t, s, req("k", "fp1"))
		sleepPastTTL()
		taker := storetest.ParkBegin(ctxT(t), s, faults.BeginAfterSelect, req("k", "fp1"))
		errA := s.Release(ctxT(t), ref("k"), a.Token)
		dO := mustBegin(t, s, req("k", "fp2"))
		sleepPastTTL()
		dT, errT := taker.Resume()
		if errT != nil {
			t.Fatal(errT)
		}
		return dT.Outcome == stores.Claimed && dO.Outcome == stores.Claimed,
			fmt.Sprintf("A's release: %v; O (fp2): %v; T (fp1): %v (takeover %v)", errA, dO.Outcome, dT.Outcome, dT.Takeover)
	},
	"blind-takeover": func(t *testing.T, s *Store) (bool, string) {
		mustBegin(t, s, req("k", "fp"))
		sleepPastTTL()
		ctx := faults.WithHandler(ctxT(t), barrier(2, faults.BeginAfterSelect))
		ds, errs := beginAll(ctx, s, []stores.Request{req("k", "fp"), req("k", "fp")}, nil)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		return storetest.TwoOwners(ds[0], ds[1], mutantTTL)
	},

	// docs/DESIGN.md §1's counterexample: A claims and pauses; B takes over and
	// releases on error; C claims afresh and gets A's token back; A's late
	// save lands on C's claim.
	"token-reuse": func(t *testing.T, s *Store) (bool, string) {
		ctx := ctxT(t)
		a := mustBegin(t, s, req("k", "fp"))
		sleepPastTTL()
		b := mustBegin(t, s, req("k", "fp"))
		wantOutcome(t, b, stores.Claimed)
		if err := s.Release(ctx, ref("k"), b.Token); err != nil {
			t.Fatal(err)
		}
		c := mustBegin(t, s, req("k", "fp"))
		wantOutcome(t, c, stores.Claimed)
		err := s.Complete(ctx, ref("k"), a.Token, stores.Response{Status: 200, Body: "from A"})
		if err != nil && !errors.Is(err, stores.ErrFenced) {
			t.Fatal(err)
		}
		return err == nil, "tokens A=" + string(a.Token) + " C=" + string(c.Token) + "; A's Complete: " + errString(err)
	},

	// The owner is gone and LockTTL has passed, but the key stays in flight.
	"no-takeover": func(t *testing.T, s *Store) (bool, string) {
		mustBegin(t, s, req("k", "fp"))
		sleepPastTTL()
		d := mustBegin(t, s, req("k", "fp"))
		return d.Outcome == stores.InFlight, d.Outcome.String()
	},

	// A done key inside the retention window (an hour) is pruned once it is
	// older than LockTTL, and its retry runs the work again.
	"short-retention": func(t *testing.T, s *Store) (bool, string) {
		ctx := ctxT(t)
		a := mustBegin(t, s, req("k", "fp"))
		if err := s.Complete(ctx, ref("k"), a.Token, stores.Response{Status: 200}); err != nil {
			t.Fatal(err)
		}
		sleepPastTTL()
		if _, err := s.Prune(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		d := mustBegin(t, s, req("k", "fp"))
		return d.Outcome == stores.Claimed, "retry after prune: " + d.Outcome.String()
	},

	// B reads A's claim as stale; before B writes, A (still the owner)
	// saves its response; B's write erases it, and the retry that should
	// replay A's answer finds the key in flight.
	"stale-overwrite": func(t *testing.T, s *Store) (bool, string) {
		ctx := ctxT(t)
		a := mustBegin(t, s, req("k", "fp"))
		sleepPastTTL()
		resp := stores.Response{Status: 200, Body: "from A"}
		var saved error
		called := false
		save := func() { called, saved = true, s.Complete(ctx, ref("k"), a.Token, resp) }
		b, err := s.Begin(faults.WithHandler(ctx, onFailpoint(faults.BeginAfterSelect, save)), req("k", "fp"))
		if err != nil {
			t.Fatal(err)
		}
		if !called {
			save() // the correct store has no read-write gap: A saves after B
		}
		if saved != nil && !errors.Is(saved, stores.ErrFenced) {
			t.Fatal(saved)
		}
		c := mustBegin(t, s, req("k", "fp"))
		lost := saved == nil && (c.Outcome != stores.Replay || c.Response != resp)
		return lost, "A's Complete: " + errString(saved) + "; B " + b.Outcome.String() + "; retry " + c.Outcome.String()
	},
}

func errString(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}

// TestMutants shows each mutant's bug happen, and the same schedule leave
// the correct store correct.
func TestMutants(t *testing.T) {
	for _, m := range Mutants {
		if scenarios[m] == nil && storetest.Bugs[m] == nil {
			t.Errorf("mutant %s has no scenario", m)
		}
	}
	for _, m := range Mutants {
		sc, retention := scenarios[m], time.Hour
		if bug := storetest.Bugs[m]; sc == nil && bug != nil {
			if m == "never-expire" || m == "prune-drops-tenant" {
				retention = 300 * time.Millisecond // it waits the retention out
			}
			sc = func(t *testing.T, s *Store) (bool, string) {
				return bug(t, s, storetest.Clock{Now: time.Now, Advance: time.Sleep}, s.cfg)
			}
		}
		if sc == nil {
			continue
		}
		for _, variant := range []string{m, stores.Correct} {
			t.Run(m+"/"+variant, func(t *testing.T) {
				t.Parallel()
				s := newStore(t, variant, mutantTTL, retention)
				bug, seen := sc(t, s)
				t.Logf("%s: %s", variant, seen)
				// A mutant's schedule may be run again, on a fresh store,
				// up to mutantTries times in all: on a loaded machine the
				// two claims of blind-takeover were decided 329ms apart,
				// more than LockTTL, so the second could have been a fair
				// takeover and showed nothing (CI rehearsal). The correct
				// store runs it once: a bug there is a bug.
				for try := 1; variant != stores.Correct && !bug && try < mutantTries; try++ {
					bug, seen = sc(t, newStore(t, variant, mutantTTL, retention))
					t.Logf("%s, again: %s", variant, seen)
				}
				if variant == stores.Correct && bug {
					t.Errorf("the correct store shows %s's bug: %s", m, seen)
				}
				if variant != stores.Correct && !bug {
					t.Errorf("mutant %s did not show its bug: %s", m, seen)
				}
			})
		}
	}
}

// TestMutantsMostlyCorrect: away from their bug, the mutants follow the
// decision table, so a harness kills them for the bug and not for noise.
func TestMutantsMostlyCorrect(t *testing.T) {
	for _, m := range Mutants {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, m, time.Hour, time.Hour)
			ctx := context.Background()
			a := mustBegin(t, s, req("k", "fp"))
			wantOutcome(t, a, stores.Claimed)
			wantOutcome(t, mustBegin(t, s, req("k", "fp")), stores.InFlight)
			if m != "no-fingerprint" {
				wantOutcome(t, mustBegin(t, s, req("k", "other")), stores.Mismatch)
			}
			resp := stores.Response{Status: 201, Body: "ok"}
			if err := s.Complete(ctx, ref("k"), a.Token, resp); err != nil {
				t.Fatal(err)
			}
			if d := mustBegin(t, s, req("k", "fp")); d.Outcome != stores.Replay || d.Response != resp {
				t.Errorf("after Complete: %+v", d)
			}
			b := mustBegin(t, s, req("k2", "fp"))
			if err := s.Release(ctx, ref("k2"), b.Token); err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, mustBegin(t, s, req("k2", "fp")), stores.Claimed)
		})
	}
}
