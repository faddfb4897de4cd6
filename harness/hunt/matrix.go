package hunt

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/internal/pool"
	"github.com/idemcheck/idemcheck/stores"
)

// MutantsOptions configure RunMutants.
type MutantsOptions struct {
	// Seeds is how many consecutive seeds, from Options.Seed, each mutant
	// is hunted with (and the correct store checked with).
	Seeds int
	Hunt  Options
	// Mutants to hunt; empty means MutantsFor(backend).
	Mutants []string
	// CorrectKeys is how many keys (episodes) each correct run has.
	CorrectKeys int
	// Progress, if set, hears a line as each hunt or check starts.
	Progress func(string)
	// Parallel is how many hunts (a mutant on a seed) run at once, and how
	// many correct-store runs are checked at once (0 or 1: one at a time).
	// Each hunt and run has its own store.
	Parallel int
	// Began, if set, hears each job as it starts, and Finished each one
	// that finished as it ends, from the goroutines that run them: a
	// journal keeps them, so that a run whose process dies still reports
	// what it finished (Matrix).
	Began    func(Job)
	Finished func(Done)
}

// DefaultParallel is how many hunts `idemcheck mutants` runs at once. A
// hunt spends its time waiting (pauses past LockTTL, the scheduler's
// ticks, shrinking's replays), not on the CPU: eight at once killed every
// mutant on every seed of 20 on the 2-core machine in half the time of
// four, and sixteen `mutants --store postgres` in 7.4 s against 10.3 s,
// the machine busy 9 of its 15 CPU-seconds (docs/performance.md).
const DefaultParallel = 16

// MutantReport is one mutant's row of the matrix, over every seed.
type MutantReport struct {
	Name     string `json:"name"`
	Side     string `json:"side"`
	Scenario string `json:"scenario"`
	// Killed: on every seed.
	Killed bool `json:"killed"`
	// Checker names the bug best on most seeds; Checkers lists every
	// checker that named it on some seed.
	Checker  string   `json:"checker"`
	Checkers []string `json:"checkers"`
	// Seconds is the median over the seeds of the time to the kill (see
	// Kill.Seconds); MaxSeconds the slowest.
	Seconds    float64 `json:"seconds"`
	MaxSeconds float64 `json:"max_seconds"`
	Kills      int     `json:"kills"`
	Seeds      int     `json:"seeds"`
	// Trace is the shortest killing trace over the seeds; Schedule its
	// episode's interleaving (scheduled scenarios only).
	Trace    []string `json:"trace"`
	Schedule []string `json:"schedule,omitempty"`
	Detail   string   `json:"detail,omitempty"`
	Skipped  string   `json:"skipped,omitempty"`
	Runs     []Kill   `json:"runs"`
	// Unfinished counts the seeds whose hunt did not finish (the run was
	// cut short): a row with some and no survivor is undecided.
	Unfinished int `json:"unfinished,omitempty"`
}

// CorrectRun is the correct store on one kill scenario with one seed.
type CorrectRun struct {
	Scenario   string            `json:"scenario"`
	Seed       int64             `json:"seed"`
	Verdict    check.Verdict     `json:"verdict"`
	Seconds    float64           `json:"seconds"`
	Skipped    string            `json:"skipped,omitempty"`
	Violations []check.Violation `json:"violations,omitempty"`
	// Undecided says why an undecided run was
	// (results.ScenarioResult.WhyUndecided).
	Undecided string `json:"undecided,omitempty"`
}

// CorrectReport is the correct store on every kill scenario and seed.
type CorrectReport struct {
	Verdict check.Verdict `json:"verdict"`
	Runs    []CorrectRun  `json:"runs"`
}

// MutantsReport is the matrix `idemcheck mutants` prints.
type MutantsReport struct {
	Store   string         `json:"store"`
	Seed    int64          `json:"seed"`
	Seeds   int            `json:"seeds"`
	Mutants []MutantReport `json:"mutants"`
	Correct CorrectReport  `json:"correct"`
	Seconds float64        `json:"seconds"`
	// Budget is each hunt's budget (--budget), in seconds: a mutant that
	// survived was not caught within it (0: not recorded).
	Budget float64 `json:"budget,omitempty"`
	// Unfinished lists the jobs of a run cut short that did not finish:
	// neither killed nor survived, or the correct store not judged there.
	Unfinished []Unfinished `json:"unfinished,omitempty"`
}

// Survivors lists the mutants that survived a finished hunt on some seed
// (skipped ones aside): each must die on every seed.
func (r *MutantsReport) Survivors() []string {
	var out []string
	for _, m := range r.Mutants {
		if !m.Killed && m.Skipped == "" && len(m.Runs) > m.Kills {
			out = append(out, m.Name)
		}
	}
	return out
}

// Verdict is the matrix's: fail when a mutant survived or the correct
// store failed, whatever did not finish (what finished proves it);
// undecided when a job did not finish or a correct-store run was
// undecided; else pass.
func (r *MutantsReport) Verdict() check.Verdict {
	switch {
	case len(r.Survivors()) > 0 || r.Correct.Verdict == check.Fail:
		return check.Fail
	case len(r.Unfinished) > 0 || r.Correct.Verdict != check.Pass:
		return check.Unknown
	}
	return check.Pass
}

// RunMutants hunts each mutant of o.Backend with its kill scenario on each
// seed, then runs the correct store on every kill scenario on each seed. A
// mutant that survives a scheduled scenario on a server-clock store is
// hunted once more, with LoadedServerLockTTL, before it counts as a
// survivor on that seed (its time and episodes are the two hunts').
func RunMutants(ctx context.Context, o harness.Options, mo MutantsOptions) (*MutantsReport, error) {
	start := time.Now()
	if mo.Seeds < 1 {
		mo.Seeds = 1
	}
	if mo.CorrectKeys < 1 {
		mo.CorrectKeys = 4
	}
	progress := func(string) {}
	if mo.Progress != nil {
		var mu sync.Mutex // hunts run at once (Parallel)
		progress = func(line string) {
			mu.Lock()
			defer mu.Unlock()
			mo.Progress(line)
		}
	}
	mutants := mo.Mutants
	if len(mutants) == 0 {
		mutants = MutantsFor(o.Backend)
	}
	for _, m := range mutants {
		if _, _, ok := MutantScenario(m); !ok {
			return nil, fmt.Errorf("unknown mutant %q (known: %v)", m, MutantsFor(o.Backend))
		}
		if !o.Backend.HasVariant(m) && !workload.IsClientMutant(m) {
			return nil, fmt.Errorf("store %s has no mutant %q (known: %v)", o.Backend.Name, m, MutantsFor(o.Backend))
		}
	}
	rep := &MutantsReport{Store: o.Backend.Name, Seed: o.Seed, Seeds: mo.Seeds}
	// Every (mutant, seed) hunt is a job of its own, so that a mutant whose
	// scenario runs in real time does not hold the others up seed after
	// seed; the rows are made from the kills in order afterwards.
	// The correct store's runs are jobs of the same pool, after the
	// hunts: the cores a long hunt leaves idle at the end go to them.
	jobs := MatrixJobs(mutants, o.Seed, mo.Seeds)
	hunts := len(mutants) * mo.Seeds
	done := make([]*Done, len(jobs))
	began := make([]bool, len(jobs))
	var mu sync.Mutex // began and done, by the jobs run at once
	finished := func(j int, d Done) {
		mu.Lock()
		done[j] = &d
		mu.Unlock()
		if mo.Finished != nil {
			mo.Finished(d)
		}
	}
	// A job that restarts the server the others share, with no server of
	// its own to do it on, runs after the others, alone; so does one that
	// must be alone for another reason (a failover or partition of the
	// cluster the others share: with the hunts beside it, the failed
	// primary broke their statements, and the run stopped, exit 2).
	shared, alone := splitAlone(o, jobs)
	// The longest first: a job's time is mostly its scenario's round
	// (a hunt stops at its first kill) or its shrinking (jobCost), and a
	// job with real-time fault windows or a server of its own to start,
	// begun last, was the matrix's tail while the other lanes sat idle.
	slices.SortStableFunc(shared, func(a, b int) int {
		return cmp.Compare(jobCost(o, mo, jobs[b]), jobCost(o, mo, jobs[a]))
	})
	job := func(j int) error {
		if ctx.Err() != nil {
			return nil
		}
		mu.Lock()
		began[j] = true
		mu.Unlock()
		if mo.Began != nil {
			mo.Began(jobs[j])
		}
		if j >= hunts {
			c := jobs[j]
			progress(fmt.Sprintf("correct store, %s, seed %d", c.Scenario, c.Seed))
			if run := runCorrect(ctx, o, c, mo); run != nil && (ctx.Err() == nil || run.Verdict == check.Fail) {
				finished(j, Done{Job: c, Correct: run}) // a run cut short decided nothing, unless it failed
			}
			return nil
		}
		i, s := j/mo.Seeds, j%mo.Seeds
		m, seed := mutants[i], o.Seed+int64(s)
		progress(fmt.Sprintf("[%d/%d] %s, seed %d", i+1, len(mutants), m, seed))
		oo := o
		oo.Seed = seed
		hh := mo.Hunt
		if s > 0 {
			hh.Shrink = 0 // shrink one seed's trace: the others are evidence of the kill
		}
		k, err := Hunt(ctx, oo, m, hh)
		if err == nil && !k.Killed && k.Skipped == "" && ctx.Err() == nil && hh.ServerLockTTL == 0 && longerLockTTLHelps(oo, k.Scenario) {
			// A survivor of a scheduled scenario on a server-clock store
			// is hunted again with a LockTTL four times as long (see
			// Options.ServerLockTTL) before it is called a survivor: on a
			// loaded machine every claim it needed live may have been
			// stale already.
			progress(fmt.Sprintf("[%d/%d] %s, seed %d, again with LockTTL %v", i+1, len(mutants), m, seed, LoadedServerLockTTL))
			hl := hh
			hl.ServerLockTTL = LoadedServerLockTTL
			var again *Kill
			if again, err = Hunt(ctx, oo, m, hl); err == nil {
				again.Seconds += k.Seconds
				again.Episodes += k.Episodes
				k = again
			}
		}
		if err != nil {
			return fmt.Errorf("mutant %s, seed %d: %w", m, seed, err)
		}
		finished(j, Done{Job: jobs[j], Kill: k})
		return nil
	}
	err := pool.Each(len(shared), mo.Parallel, func(j int) error { return job(shared[j]) })
	if err == nil {
		err = pool.Each(len(alone), 1, func(j int) error { return job(alone[j]) })
	}
	if err != nil && ctx.Err() == nil {
		return nil, err
	}
	var all []Done
	var started []Job
	for j := range jobs {
		if done[j] != nil {
			all = append(all, *done[j])
		} else if began[j] {
			started = append(started, jobs[j])
		}
	}
	Matrix(rep, mutants, all, started)
	rep.Seconds = time.Since(start).Seconds()
	return rep, ctx.Err()
}

// splitAlone splits the matrix's jobs (their indices) into those that
// may run at once and those that must run alone, after them: see
// RunMutants.
func splitAlone(o harness.Options, jobs []Job) (shared, alone []int) {
	caps := o.Caps()
	for j := range jobs {
		sc, ok := scenario.Lookup(jobs[j].Scenario)
		if ok && (o.OwnServer == nil && o.FaultsItsServer(sc) || !sc.FaultsServer && sc.Alone != nil && sc.Alone(caps)) {
			alone = append(alone, j)
		} else {
			shared = append(shared, j)
		}
	}
	return shared, alone
}

// runCorrect runs the correct store on one scenario and seed, with the
// options the hunts used; nil when an interrupt stopped it before it
// could judge anything.
func runCorrect(ctx context.Context, o harness.Options, j Job, mo MutantsOptions) *CorrectRun {
	oo := OptionsFor(o)
	oo.Variant, oo.Scenarios, oo.Seed, oo.Keys = stores.Correct, []string{j.Scenario}, j.Seed, mo.CorrectKeys
	// A scenario that restarts the server runs on a server of its own
	// when o can start one (harness.Run does so only with Parallel above
	// 1): the hunts beside it share this one.
	oo.Parallel = max(oo.Parallel, 2)
	run := CorrectRun{Scenario: j.Scenario, Seed: j.Seed}
	sum, err := harness.Run(ctx, oo)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil // cut short before it judged anything
	case err != nil:
		run.Verdict, run.Violations = check.Fail, []check.Violation{{Checker: "setup", Detail: err.Error()}}
	case len(sum.Scenarios) == 0:
		run.Verdict, run.Undecided = check.Unknown, "the run judged no scenario"
	default:
		sr := sum.Scenarios[0]
		run.Verdict, run.Seconds, run.Skipped, run.Violations = sr.Verdict, sr.Seconds, sr.Skipped, sr.Violations
		if sr.Verdict == check.Unknown {
			run.Undecided = sr.WhyUndecided()
		}
	}
	return &run
}

func mostCommon(counts map[string]int) string {
	best, n := "", 0
	names := make([]string, 0, len(counts))
	for c := range counts {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if counts[c] > n {
			best, n = c, counts[c]
		}
	}
	return best
}

// LoadedServerLockTTL is the LockTTL a survivor of a scheduled scenario on
// a server-clock store is hunted again with (Mutants): four times
// ScheduledServerLockTTL.
const LoadedServerLockTTL = 4 * ScheduledServerLockTTL

// longerLockTTLHelps reports whether the scenario is scheduled and the
// store judges by its server's clock: where the hunt's LockTTL is
// ScheduledServerLockTTL, short enough for load to make every claim stale
// before the step that would show the bug.
func longerLockTTLHelps(o harness.Options, name string) bool {
	sc, ok := scenario.Lookup(name)
	return ok && sc.Scheduled && o.Backend.Clock == stores.ServerClock
}

// jobCost forecasts a matrix job's wall time as one round of its scenario
// (harness.Options.ScenarioCost), for ordering the jobs longest first,
// plus the shrink budget of a hunt that shrinks its kill (a scheduled
// scenario's, on the first seed): a kill comes in the first episodes,
// and shrinking then took the rest of the budget, so those hunts, begun
// last as the cheapest, were the matrix's tail.
func jobCost(o harness.Options, mo MutantsOptions, j Job) time.Duration {
	sc, ok := scenario.Lookup(j.Scenario)
	if !ok {
		return 0
	}
	c := o.ScenarioCost(sc)
	if j.Mutant != "" && sc.Scheduled && j.Seed == o.Seed {
		c += mo.Hunt.Shrink
	}
	return c
}
