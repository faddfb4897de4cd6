package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
	"github.com/idemcheck/idemcheck/stores/storetest"
)

// A bugScenario drives a store through one mutant's counterexample and says
// whether the bug happened (and what was seen). The mutant must show it; the
// correct variant, run the same way, must not.
type bugScenario func(t *testing.T, s stores.Store) (bug bool, seen string)

var bugScenarios = map[string]bugScenario{
	// Two requests read "no row", then both write: two owners.
	"select-then-insert": func(t *testing.T, s stores.Store) (bool, string) {
		ds := concurrently(t, s, 2, faults.BeginAfterSelect, func(int) stores.Request { return req(key("race"), "fp", t0) })
		return claims(ds) == 2, fmt.Sprint(outcomes(ds))
	},
	// Two stores on one file, as two processes have, each read "no row"
	// (each holding its own lock in process memory), then both write.
	"process-lock": func(t *testing.T, s stores.Store) (bool, string) {
		var path string
		if err := s.(*Store).db.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
			t.Fatal(err)
		}
		other := openAt(t, path, s.(*Store).variant)
		ds := concurrentlyOn(t, []stores.Store{s, other}, 2, faults.BeginAfterSelect, func(int) stores.Request { return req(key("race"), "fp", t0) })
		return claims(ds) == 2, fmt.Sprint(outcomes(ds))
	},
	// A is taken over, then saves with its old token: the save lands.
	"unfenced-complete": func(t *testing.T, s stores.Store) (bool, string) {
		ctx := context.Background()
		k := key("slow-owner")
		a := mustClaim(t, s, req(k, "fp", t0), false)
		b := mustClaim(t, s, req(k, "fp", t0.Add(lockTTL)), true)
		errA := s.Complete(ctx, k, a, stores.Response{Status: 200, Body: "from A"})
		errB := s.Complete(ctx, k, b, stores.Response{Status: 200, Body: "from B"})
		d := begin(t, s, req(k, "fp", t0.Add(lockTTL+time.Second)))
		return errA == nil, fmt.Sprintf("A's stale save: %v; B's save: %v; replayed %q", errA, errB, d.Response.Body)
	},
	// A is taken over, then releases with its old token: B's claim is gone.
	"unfenced-release": func(t *testing.T, s stores.Store) (bool, string) {
		k := key("slow-owner")
		a := mustClaim(t, s, req(k, "fp", t0), false)
		mustClaim(t, s, req(k, "fp", t0.Add(lockTTL)), true)
		errA := s.Release(context.Background(), k, a)
		d := begin(t, s, req(k, "fp", t0.Add(lockTTL+time.Second))) // B is still working
		return errA == nil && d.Outcome == stores.Claimed, fmt.Sprintf("A's stale release: %v; a third request while B works: %v", errA, d.Outcome)
	},
	// The key is reused with other parameters: the first answer is replayed.
	"no-fingerprint": func(t *testing.T, s stores.Store) (bool, string) {
		k := key("reused")
		tok := mustClaim(t, s, req(k, "amount=10", t0), false)
		if err := s.Complete(context.Background(), k, tok, stores.Response{Status: 200, Body: "charged 10"}); err != nil {
			t.Fatal(err)
		}
		d := begin(t, s, req(k, "amount=99", t0.Add(time.Second)))
		return d.Outcome == stores.Replay, fmt.Sprintf("other parameters: %v %q", d.Outcome, d.Response.Body)
	},
	// Two takers read the same stale claim, then both write: two owners.
	"blind-takeover": func(t *testing.T, s stores.Store) (bool, string) {
		k := key("stale")
		mustClaim(t, s, req(k, "fp", t0), false)
		ds := concurrently(t, s, 2, faults.BeginAfterSelect, func(int) stores.Request { return req(k, "fp", t0.Add(lockTTL)) })
		return claims(ds) == 2, fmt.Sprint(outcomes(ds))
	},
	// A's claim is stale; T reads it and stops before its write; A
	// releases, and O, with other parameters (its clock behind), claims
	// the key again; T's write finds a claim in flight and stale, not the
	// one it read, and takes it over: T and O both hold claims, of two
	// fingerprints. (The correct store decides T in one step: T takes A's
	// claim over, and O is told 422.)
	"takeover-by-state": func(t *testing.T, s stores.Store) (bool, string) {
		ctx := context.Background()
		k := key("aba")
		a := mustClaim(t, s, req(k, "fp1", t0), false)
		taker := storetest.ParkBegin(ctx, s, faults.BeginAfterSelect, req(k, "fp1", t0.Add(lockTTL)))
		errA := s.Release(ctx, k, a)
		dO := begin(t, s, req(k, "fp2", t0.Add(-time.Millisecond)))
		dT, errT := taker.Resume()
		if errT != nil {
			t.Fatal(errT)
		}
		return dT.Outcome == stores.Claimed && dO.Outcome == stores.Claimed,
			fmt.Sprintf("A's release: %v; O (fp2): %v; T (fp1): %v (takeover %v)", errA, dO.Outcome, dT.Outcome, dT.Takeover)
	},
	// docs/DESIGN.md §1: A claims at t and stalls; B takes over and releases on
	// error; C, whose clock is behind, claims at t again and gets A's token;
	// A wakes and its save lands on C's claim.
	"token-reuse": func(t *testing.T, s stores.Store) (bool, string) {
		ctx := context.Background()
		k := key("reused-token")
		a := mustClaim(t, s, req(k, "fp", t0), false)
		b := mustClaim(t, s, req(k, "fp", t0.Add(lockTTL)), true)
		if err := s.Release(ctx, k, b); err != nil {
			t.Fatal(err)
		}
		c := mustClaim(t, s, req(k, "fp", t0), false)
		errA := s.Complete(ctx, k, a, stores.Response{Status: 200, Body: "from A"})
		return errA == nil, fmt.Sprintf("tokens A=%s C=%s; A's stale save: %v", a, c, errA)
	},
	// The owner crashed; long after LockTTL the key is still stuck.
	"no-takeover": func(t *testing.T, s stores.Store) (bool, string) {
		k := key("crashed-owner")
		mustClaim(t, s, req(k, "fp", t0), false)
		d := begin(t, s, req(k, "fp", t0.Add(100*lockTTL)))
		return d.Outcome == stores.InFlight, fmt.Sprintf("100 LockTTLs later: %v", d.Outcome)
	},
	// A retry well inside the retention window finds its key pruned.
	"short-retention": func(t *testing.T, s stores.Store) (bool, string) {
		ctx := context.Background()
		k := key("charged")
		tok := mustClaim(t, s, req(k, "fp", t0), false)
		if err := s.Complete(ctx, k, tok, stores.Response{Status: 200, Body: "charged"}); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(2 * lockTTL) // << retention
		n, err := s.Prune(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		d := begin(t, s, req(k, "fp", at))
		return d.Outcome == stores.Claimed, fmt.Sprintf("pruned %d; the retry: %v", n, d.Outcome)
	},
	// B reads A's claim as stale and stalls; A finishes and saves; B writes
	// the row it read back: A's response is erased and the work runs again.
	"stale-overwrite": func(t *testing.T, s stores.Store) (bool, string) {
		ctx := context.Background()
		k := key("slow-owner")
		a := mustClaim(t, s, req(k, "fp", t0), false)
		reached, resume := make(chan struct{}), make(chan struct{})
		bctx := faults.WithHandler(ctx, faults.HandlerFunc(func(_ context.Context, name string) error {
			if name == faults.BeginAfterSelect {
				close(reached)
				<-resume
			}
			return nil
		}))
		bDone := make(chan stores.Decision, 1)
		go func() {
			d, err := s.Begin(bctx, req(k, "fp", t0.Add(lockTTL)))
			if err != nil {
				t.Error(err)
			}
			bDone <- d
		}()
		var b stores.Decision
		select {
		case <-reached: // the mutant stalls between its read and its write
		case b = <-bDone: // the correct store decides in one step
		}
		errA := s.Complete(ctx, k, a, stores.Response{Status: 200, Body: "from A"})
		close(resume)
		if b.Outcome == 0 {
			b = <-bDone
		}
		d := begin(t, s, req(k, "fp", t0.Add(lockTTL+time.Second)))
		return errA == nil && b.Outcome == stores.Claimed,
			fmt.Sprintf("A's save: %v; B: %v (takeover %v); then: %v %q", errA, b.Outcome, b.Takeover, d.Outcome, d.Response.Body)
	},
}

// concurrently runs n Begins at once, each holding at the failpoint until all
// n have reached it (the interleaving r1 r2 w1 w2); a store that never passes
// the failpoint just runs them.
func concurrently(t *testing.T, s stores.Store, n int, failpoint string, r func(i int) stores.Request) []stores.Decision {
	t.Helper()
	return concurrentlyOn(t, []stores.Store{s}, n, failpoint, r)
}

// concurrentlyOn is concurrently with the i-th Begin on ss[i%len(ss)]:
// stores of their own on one database, as processes have.
func concurrentlyOn(t *testing.T, ss []stores.Store, n int, failpoint string, r func(i int) stores.Request) []stores.Decision {
	t.Helper()
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	ctx := faults.WithHandler(context.Background(), faults.HandlerFunc(func(_ context.Context, name string) error {
		if name != failpoint {
			return nil
		}
		mu.Lock()
		if arrived++; arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the others never reached the failpoint")
		}
	}))
	ds := make([]stores.Decision, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := ss[i%len(ss)].Begin(ctx, r(i))
			if err != nil {
				t.Errorf("Begin %d: %v", i, err)
			}
			ds[i] = d
		}()
	}
	wg.Wait()
	return ds
}

func claims(ds []stores.Decision) int {
	n := 0
	for _, d := range ds {
		if d.Outcome == stores.Claimed {
			n++
		}
	}
	return n
}

func outcomes(ds []stores.Decision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%v(takeover %v)", d.Outcome, d.Takeover))
	}
	return out
}

// TestMutants shows each mutant's bug happen, on SQLite and on the memory
// reference store alike, and the correct variants not have it.
func TestMutants(t *testing.T) {
	backends := map[string]func(t *testing.T, variant string) stores.Store{
		"sqlite": func(t *testing.T, v string) stores.Store { return open(t, v) },
		"memory": func(t *testing.T, v string) stores.Store {
			s, err := memory.New(testConfig(v))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for _, m := range Mutants {
		scenario, ok := bugScenarios[m]
		if bug, shared := storetest.Bugs[m]; shared && !ok {
			scenario, ok = func(t *testing.T, s stores.Store) (bool, string) {
				return bug(t, s, manualClock(), testConfig(m))
			}, true
		}
		if !ok {
			t.Errorf("no scenario for mutant %s", m)
			continue
		}
		for _, backend := range []string{"sqlite", "memory"} {
			if row, _ := stores.LookupMutant(m); !row.RunsOn(backend) {
				continue // a bug of SQLite's alone (process-lock: processes)
			}
			for _, v := range []string{m, stores.Correct} {
				t.Run(fmt.Sprintf("%s/%s/%s", m, backend, v), func(t *testing.T) {
					bug, seen := scenario(t, backends[backend](t, v))
					if want := v == m; bug != want {
						t.Fatalf("bug happened: %v, want %v; saw %s", bug, want, seen)
					}
					t.Log(seen)
				})
			}
		}
	}
}

// manualClock starts at t0 and moves only when advanced.
func manualClock() storetest.Clock {
	now := t0
	return storetest.Clock{Now: func() time.Time { return now }, Advance: func(d time.Duration) { now = now.Add(d) }}
}
