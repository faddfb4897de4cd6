package hunt_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/internal/pool"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/lease"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	_ "github.com/idemcheck/idemcheck/stores/redis"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// storeMutants are the store-side mutants every backend of
// stores.TableBackends implements, in the catalogue's order.
func storeMutants() []string {
	var out []string
	for _, m := range stores.Catalogue {
		if m.Side == stores.StoreSide && !slices.ContainsFunc(stores.TableBackends, func(b string) bool { return !m.RunsOn(b) }) {
			out = append(out, m.Name)
		}
	}
	return out
}

// TestCatalogue: stores.Catalogue is whole. Each row has a bug line, a
// side, a scenario that exists and a checker that does; a client-side row
// has its mistake in the workload, any other names registered backends;
// every backend's variants are exactly the correct one and its rows; and
// the hunt reads each row's scenario and side.
func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range stores.Catalogue {
		if m.Name == "" || seen[m.Name] {
			t.Errorf("row %q: no name, or a name twice", m.Name)
		}
		seen[m.Name] = true
		if m.Bug == "" || strings.Contains(m.Bug, "\n") {
			t.Errorf("%s: the bug is not one line: %q", m.Name, m.Bug)
		}
		if _, ok := scenario.Lookup(m.Scenario); !ok {
			t.Errorf("%s: no scenario %q", m.Name, m.Scenario)
		}
		if !slices.Contains(check.Preference, m.Checker) {
			t.Errorf("%s: checker %q is not one of %v", m.Name, m.Checker, check.Preference)
		}
		if m.Strict && m.Checker != check.Retention && m.Checker != check.Availability {
			t.Errorf("%s: strict (its bug only a finding of %s or %s), but expected to be caught by %s", m.Name, check.Retention, check.Availability, m.Checker)
		}
		switch m.Side {
		case stores.ClientSide:
			if _, ok := workload.LookupClientMutant(m.Name); !ok || len(m.On) > 0 {
				t.Errorf("%s: client side, with a mistake in the workload %v, on %v", m.Name, ok, m.On)
			}
		case stores.StoreSide, stores.ConfigSide:
			if len(m.On) == 0 {
				t.Errorf("%s: on no backend", m.Name)
			}
			for _, b := range m.On {
				if _, err := stores.Lookup(b); err != nil {
					t.Errorf("%s: %v", m.Name, err)
				}
			}
		default:
			t.Errorf("%s: side %q", m.Name, m.Side)
		}
		sc, side, ok := hunt.MutantScenario(m.Name)
		if !ok || sc != m.Scenario || side != string(m.Side) {
			t.Errorf("%s: the hunt reads scenario %q, side %q (%v)", m.Name, sc, side, ok)
		}
	}
	for _, name := range stores.Backends() {
		b, _ := stores.Lookup(name)
		want := []string{stores.Correct}
		for _, m := range stores.Catalogue {
			if m.Side != stores.ClientSide && slices.Contains(m.On, name) {
				want = append(want, m.Name)
			}
		}
		if got := b.Variants(); !slices.Equal(got, want) {
			t.Errorf("%s: variants %v, want the catalogue's %v", name, got, want)
		}
		got := slices.Sorted(slices.Values(hunt.MutantsFor(b)))
		if want := slices.Sorted(slices.Values(slices.Concat(want[1:], stores.MutantNames(stores.ClientSide)))); !slices.Equal(got, want) {
			t.Errorf("%s: hunts %v, want %v", name, got, want)
		}
	}
	if _, _, ok := hunt.MutantScenario("no-such-mutant"); ok {
		t.Error("an unknown mutant has a scenario")
	}
}

// logDemoRun logs a demo run's steps and answers, each line labelled.
func logDemoRun(t *testing.T, label string, r *hunt.DemoRun) {
	t.Helper()
	for _, l := range r.Lines {
		t.Logf("%s: %s %s -> %s", label, l.Client, l.Text, l.Result)
	}
	t.Logf("%s: answers: %s", label, strings.Join(r.Answers, "; "))
}

// outsideClient matches a client a demo's harm names by its number, not its
// letter: one outside the script, the harness's final probe.
var outsideClient = regexp.MustCompile(`client \d+`)

// TestScheduledScenariosOnEveryBackend: on each backend, every store-side
// mutant dies in the scenario stores.Catalogue names for it (seed 1), the
// correct store passes every scheduled scenario, and each mutant's demo
// shows the harm on the mutant and none on the correct store. One server
// per backend serves all three. The backends run side by side: their time
// is real-time waits (a tick of a scheduled episode waits a server-clock
// store's LockTTL out), not work, and one after another they took 121 s.
func TestScheduledScenariosOnEveryBackend(t *testing.T) {
	for _, name := range []string{"memory", "sqlite", "postgres", "redis"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := harnesstest.Options(t, name, stores.Correct)
			ctx := context.Background()
			t.Run("mutants die", func(t *testing.T) {
				for _, m := range storeMutants() {
					// 400 ms on the server stores: proves the same as the
					// CLI's first 100 ms, with room for make test's load.
					// At least 100 episodes however slow they are (idle,
					// the slowest kill took 35): a loaded machine fits
					// fewer in the budget, and a seed's episodes are the
					// same at any speed.
					k, err := hunt.Hunt(ctx, o, m, hunt.Options{Budget: 30 * time.Second, MinEpisodes: 100, ServerLockTTL: hunt.LoadedServerLockTTL})
					if err != nil {
						t.Fatalf("%s: %v", m, err)
					}
					if !k.Killed {
						t.Errorf("%s survived %s for %d episodes (%.1fs)", m, k.Scenario, k.Episodes, k.Seconds)
						continue
					}
					if len(k.Trace) == 0 || (scenario.IsScheduled(k.Scenario) && len(k.Schedule) == 0) {
						t.Errorf("%s: killed without a trace, or a schedule of its scheduled episode", m)
					}
					t.Logf("%-19s killed by %-19s in %2d episode(s), %.3fs", m, k.Checker, k.Episodes, k.Seconds)
				}
			})
			t.Run("correct passes", func(t *testing.T) {
				for _, sc := range []string{"sched-race", "sched-takeover", "sched-crash", "sched-mismatch", "sched-retention"} {
					oo := hunt.OptionsFor(o)
					oo.Variant, oo.Scenarios, oo.Keys = stores.Correct, []string{sc}, 4
					sum, err := harness.Run(ctx, oo)
					if err != nil {
						t.Fatal(err)
					}
					s := sum.Scenarios[0]
					if s.Verdict != check.Pass {
						t.Errorf("correct store on %s: %s: %v", sc, s.Verdict, s.Violations)
					}
					if s.Ops == 0 || s.WorkRuns == 0 {
						t.Errorf("%s did nothing: %d ops, %d work runs", sc, s.Ops, s.WorkRuns)
					}
				}
			})
			t.Run("demos", func(t *testing.T) {
				// A LockTTL of 2 s on the server stores (the CLI's demo
				// uses 100 ms): under make test's load, at 100 ms and
				// at 400 ms, the correct store's run of
				// select-then-insert's schedule saw A's claim go stale
				// by the server's clock while A was parked, and B took
				// it over and charged again (the lease working, on a
				// machine slower than the lease). Each tick waits it out.
				// The demos run four at a time, each on a store of its
				// own: their time is the ticks' waits, not work.
				o := o
				o.LockTTL, o.ScheduledLockTTL = 2*time.Second, 2*time.Second
				demos := hunt.ScriptedDemos()
				err := pool.Each(len(demos), 4, func(i int) error {
					m := demos[i]
					info, bad, good, err := hunt.Demo(ctx, o, m)
					if err != nil {
						return fmt.Errorf("%s: %w", m, err)
					}
					missed := len(bad.Caught) == 0
					if missed {
						t.Errorf("demo %s: no checker caught the mutant's run: %s", m, bad.Harm)
					}
					if !strings.HasPrefix(bad.Harm, "DOUBLE CHARGE") && !strings.HasPrefix(bad.Harm, "BROKEN") {
						missed = true
						t.Errorf("demo %s: the mutant's run did no harm: %s", m, bad.Harm)
					}
					if c := outsideClient.FindString(bad.Harm); c != "" {
						// Only the harness's final probe showed the
						// harm: the script let the bug slip past its
						// own clients (a step cut short at a
						// failpoint the store passes, say).
						missed = true
						t.Errorf("demo %s: the harm is shown by %s, not by the script's clients: %s", m, c, bad.Harm)
					}
					if missed {
						// The steps and answers say where the run left
						// the script (a make test at load 19 once ran
						// blind-takeover's without B's charge).
						logDemoRun(t, "demo "+m, bad)
					}
					if good.Spoiled() && good.Outran != "" {
						// The machine, not the store: its stall past the
						// rerun's lease is measured (a make test beside
						// six other jobs, load 40, spoiled a rerun at 20 s);
						// the CLI says so and exits 3.
						t.Logf("demo %s: the correct store's run was spoiled by the machine (%s): %s", m, good.Outran, good.Harm)
					} else if good.Spoiled() {
						t.Errorf("demo %s: the correct store's run was caught by %v: %s", m, good.Caught, good.Harm)
						// Where the machine took the run off the script.
						t.Logf("demo %s, correct store: %s", m, info.CorrectRerun)
						logDemoRun(t, "demo "+m+", correct store", good)
					}
					if len(bad.Lines) < 3 || len(bad.Lines) > 40 || len(good.Lines) > 40 {
						t.Errorf("demo %s: %d and %d lines: not a short step-by-step", m, len(bad.Lines), len(good.Lines))
					}
					if !info.Keyed && bad.Charges > 1 {
						t.Logf("%-19s %s", m, bad.Harm)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestEveryMutantDiesOnTwentySeedsMemory: on the memory store, every
// store-side mutant dies on each of 20 consecutive seeds (the other
// backends: make mutants-20 STORE=…).
func TestEveryMutantDiesOnTwentySeedsMemory(t *testing.T) {
	o := harnesstest.Options(t, "memory", stores.Correct)
	mutants := storeMutants()
	const seeds = 20
	// Every (mutant, seed) hunt is one job, eight at once (each hunt has
	// its own store): the slow ones wait out a retention period in real
	// time, and one mutant's seeds one after another made its lane the
	// whole test's length.
	type tally struct {
		secs        []float64
		maxEpisodes int
	}
	var mu sync.Mutex
	tallies := make([]tally, len(mutants))
	err := pool.Each(len(mutants)*seeds, 8, func(j int) error {
		i, seed := j/seeds, int64(1+j%seeds)
		m, oo := mutants[i], o
		oo.Seed = seed
		// At least 40 episodes (idle, no kill took over 15), so that
		// load, which fits fewer in the budget, cannot make a survivor.
		k, err := hunt.Hunt(context.Background(), oo, m, hunt.Options{Budget: 10 * time.Second, MinEpisodes: 40})
		if err != nil {
			return fmt.Errorf("%s, seed %d: %w", m, seed, err)
		}
		if !k.Killed {
			t.Errorf("%s survived seed %d (%d episodes)", m, seed, k.Episodes)
		}
		mu.Lock()
		defer mu.Unlock()
		tallies[i].secs = append(tallies[i].secs, k.Seconds)
		tallies[i].maxEpisodes = max(tallies[i].maxEpisodes, k.Episodes)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range mutants {
		t.Logf("%-19s %d seeds, median %.4fs, at most %d episodes", m, seeds, hunt.Median(tallies[i].secs), tallies[i].maxEpisodes)
	}
}

// TestClientMutantsDie: each client-side mutant, the correct store with
// clients that make the mistake, is caught by its scenario; the correct
// workload passes the same scenarios.
func TestClientMutantsDie(t *testing.T) {
	o := harnesstest.Options(t, "memory", stores.Correct)
	ctx := context.Background()
	for _, m := range workload.ClientMutants {
		k, err := hunt.Hunt(ctx, o, m.Name, hunt.Options{Budget: 20 * time.Second, MinEpisodes: 5, Keys: 2}) // each dies in its first round idle
		if err != nil {
			t.Fatal(err)
		}
		if !k.Killed || k.Side != "client" {
			t.Errorf("%s: killed %v, side %q", m.Name, k.Killed, k.Side)
			continue
		}
		if k.Checker != m.Checker {
			t.Errorf("%s: killed by %s, want %s (%s)", m.Name, k.Checker, m.Checker, k.Detail)
		}
		t.Logf("%-25s killed by %s on %s: %s", m.Name, k.Checker, k.Scenario, k.Detail)
	}
	for _, sc := range hunt.KillScenarios(workload.ClientMutantNames()) {
		oo := o
		oo.Variant, oo.Scenarios, oo.Keys = stores.Correct, []string{sc}, 2
		sum, err := harness.Run(ctx, oo)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Verdict != check.Pass {
			t.Errorf("correct workload on %s: %s: %v", sc, sum.Verdict, sum.Violations)
		}
	}
	// A client-side variant runs the correct store: check accepts it.
	oo := o
	oo.Variant, oo.Scenarios = "key-per-try", []string{"retry-after-charge"}
	if err := oo.Validate(); err != nil {
		t.Errorf("a client-side variant is refused: %v", err)
	}
	if v := workload.StoreVariant(oo.Variant); v != stores.Correct {
		t.Errorf("store variant of key-per-try: %q", v)
	}
}

// TestRunMutantsMatrix: the matrix over the memory store, with two seeds:
// every row killed on both, the correct store passing.
func TestRunMutantsMatrix(t *testing.T) {
	o := harnesstest.Options(t, "memory", stores.Correct)
	rep, err := hunt.RunMutants(context.Background(), o, hunt.MutantsOptions{
		Seeds: 2, Mutants: []string{"token-reuse", "stale-overwrite", "no-key"},
		Hunt: hunt.Options{Budget: 20 * time.Second, MinEpisodes: 5, Keys: 2, Shrink: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Survivors(); len(s) > 0 {
		t.Errorf("survivors: %v", s)
	}
	for _, m := range rep.Mutants {
		if m.Kills != 2 || len(m.Runs) != 2 || m.Checker == "" || len(m.Trace) == 0 {
			t.Errorf("%s: %d kills, %d runs, checker %q, %d trace lines", m.Name, m.Kills, len(m.Runs), m.Checker, len(m.Trace))
		}
		if r := m.Runs[0]; r.Side == "store" && r.ShrinkRuns == 0 {
			t.Errorf("%s: the first seed's kill was not shrunk", m.Name)
		} else if r.FirstTrace > 0 && len(r.Trace) > r.FirstTrace {
			t.Errorf("%s: shrinking lengthened the trace: %d → %d lines", m.Name, r.FirstTrace, len(r.Trace))
		}
	}
	if rep.Correct.Verdict != check.Pass || len(rep.Correct.Runs) != 2*2 {
		t.Errorf("correct store: %s over %d runs: %+v", rep.Correct.Verdict, len(rep.Correct.Runs), rep.Correct.Runs)
	}
}
