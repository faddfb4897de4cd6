// Package mutate scores the harness's power on mutants nobody wrote: it
// generates them from a backend's own statements and scripts (the texts a
// store passes through stores.Config.Statements at open) with small
// SQL- and Lua-aware rewriters (drop a conjunct, flip a comparison, drop a
// SET column, drop a Lua guard, swap a status literal, shift a boundary,
// turn an equality into LIKE; [Kinds] lists them), runs the kill
// scenarios against each until a checker fails, and classifies each as
// killed, survived, equivalent (by an argument the backend gives, keyed by
// the mutant's ID) or invalid (the store refused to open with it).
package mutate

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// setupTries is how often a mutant's scenario is set up before a setup
// that fails for the correct statements too makes the mutant Unjudged.
const setupTries = 3

// Options configure a mutation run.
type Options struct {
	// Scenarios are tried in order on each mutant until one kills it;
	// empty: KillScenarios(backend).
	Scenarios []string
	// Quick is each scenario's budget in the first pass (every mutant);
	// Budget in the second (the first pass's survivors only).
	Quick, Budget time.Duration
	// Episodes, if positive, also caps each scenario's episodes (or
	// rounds) per mutant and pass: a bound independent of the machine's
	// speed (tests use it; the budgets still apply).
	Episodes int
	// Workers run mutants at once; 0: GOMAXPROCS.
	Workers int
	// Only, if set, keeps the mutants whose ID contains one of these.
	Only []string
	// Limit, if positive, runs only the first Limit mutants generated.
	Limit int
	// Shard and Shards, if Shards > 1, keep of the mutants left after Only
	// and Limit those at positions p with p mod Shards = Shard (0-based):
	// the Shards runs are disjoint and together are the whole run, so they
	// can run on separate machines and their reports be merged.
	Shard, Shards int
	// Progress, if set, hears about each mutant finished, with its final
	// verdict (the backend's argument applied: equivalent, refuted).
	Progress func(done, total int, r Result)
	// Planned, if set, hears the run's plan once its mutants are
	// generated and chosen, before the correct store runs: the report
	// with its statements, scenarios and unused arguments, and a result
	// per mutant, in order, with no verdict yet. With BaselineDone and
	// Progress it is what a journal needs to report a run whose process
	// died.
	Planned func(plan *Report)
	// BaselineDone, if set, hears about each of the correct store's runs
	// as it ends.
	BaselineDone func(b BaselineRun)
}

// NotStatements says why a backend whose logic is Go code has no
// generated mutants.
const NotStatements = "its decisions are Go conditions compiled into the binary, not statement or script texts the store " +
	"loads at open: a generated mutant would be a source edit and a rebuild per mutant, which this tool does not do " +
	"(its hand-written mutants, `idemcheck mutants`, cover it)"

// KillScenarios are the scenarios that kill the backend's hand-written
// store-side mutants (configuration mutants aside), the scheduled ones
// first: they decide in a few episodes what the others need rounds for;
// then General.
// Scenarios that wait out real retention periods (Retentions > 0: the
// retention scenario) are left out: their verdict rests on the wall clock.
// On this machine at load 20 the correct Postgres and Redis stores failed
// it (at-most-once, since fixed in the checker), and an argued-equivalent
// SQLite mutant "died" in it by replay-fidelity (two answers for a key
// whose retries slipped past the retention window): it would void the
// baseline or credit the machine with a kill. The scheduled retention
// scenario, on the scheduler's clock, stays.
func KillScenarios(b stores.Backend) []string {
	var ms []string
	for _, m := range b.Mutants {
		if row, _ := stores.LookupMutant(m); row.Side != stores.ConfigSide {
			ms = append(ms, m)
		}
	}
	var scs []string
	for _, name := range hunt.KillScenarios(ms) {
		if sc, ok := scenario.Lookup(name); ok && sc.Retentions == 0 && !slices.Contains(General, name) {
			scs = append(scs, name)
		}
	}
	sort.SliceStable(scs, func(i, j int) bool {
		return strings.HasPrefix(scs[i], "sched-") && !strings.HasPrefix(scs[j], "sched-")
	})
	return append(scs, General...)
}

// SettingScenarios are the scenarios a [WeakenSetting] mutant runs after
// the kill set (when the scenarios are the defaults): the server killed
// with SIGKILL under load, where a commit acknowledged before it reached
// the disk is lost; replies lost on the way back, where a client
// library's retry resends a script that ran; and clients in processes of
// their own (the mutant's edit goes with them), where what one process's
// Go code serializes meets another process's writers (a SQLite writer
// that does not wait for the file's lock). A backend without a server,
// a proxy or worker processes skips what it cannot run.
var SettingScenarios = []string{"store-faults", "lost-reply", "workers"}

// General are the scenarios KillScenarios adds after the kill set, last:
// a generated mutant is a bug nobody wrote a scenario for, and these run
// every call of the contract (claims, retries that replay or wait, saves,
// releases after failed work) on many keys of one tenant at once, where
// each of the kill set's scheduled episodes has a key to itself. A
// statement that loses its key condition picks another key's row only
// where the tenant has one: SQLite's read after a conflicting claim,
// reading by tenant alone, survived the kill set and dies in race (see
// huntOptions); its release with the key condition flipped dies in error.
var General = []string{"race", "error"}

// huntOptions are a scenario's hunt options in a mutation run: two keys a
// round for the kill set (each scheduled episode has its key to itself),
// and every member of a family of the key space (scenario.FamilyKeys)
// for General, so that a tenant has many keys at once whatever the
// scenario's rotation of the family (with two, race's keys fell in two
// tenants once the family grew, and a read by tenant alone survived).
func huntOptions(name string, budget time.Duration, episodes int) hunt.Options {
	keys := 2
	if slices.Contains(General, name) {
		keys = scenario.FamilyKeys
	}
	return hunt.Options{Budget: budget, Keys: keys, Episodes: episodes}
}

// Collect opens a correct store of o.Backend with a recording hook and
// returns the statements it runs, in the order it passed them.
func Collect(ctx context.Context, o harness.Options) ([]Statement, error) {
	var (
		mu  sync.Mutex
		out []Statement
	)
	cfg := stores.Config{LockTTL: o.LockTTL, Retention: o.Retention, Variant: stores.Correct,
		Statements: func(name, text string) string {
			mu.Lock()
			defer mu.Unlock()
			out = append(out, Statement{Name: name, Text: text})
			return text
		}}
	st, _, _, err := o.Open(ctx, "mutate_collect", harness.NewRunID(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", o.Backend.Name, err)
	}
	st.Close()
	return out, nil
}

// Run generates the mutants of o.Backend's statements and runs each. o
// names the backend, where it lives, the seed and the timings; its
// Variant must be correct; its WorkerCommand, if set, starts workers
// that run the mutant too (harness.Options.Edit).
func Run(ctx context.Context, o harness.Options, mo Options) (*Report, error) {
	start := time.Now()
	rep := &Report{Store: o.Backend.Name, Seed: o.Seed, Statements: []Statement{}, Baseline: []BaselineRun{}, Results: []Result{},
		Quick: mo.Quick.Seconds(), Budget: mo.Budget.Seconds()}
	if !o.Backend.Statements {
		rep.NotApplicable = NotStatements
		rep.Scenarios = []string{}
		return rep, nil
	}
	o.Variant, o.Edit = stores.Correct, nil
	// A store that answers contention with errors is killed, not
	// reported: the contract owes a 409 there (check.Availability), and a
	// generated mutant that turns 409s into errors has made the store
	// worse even where it stays safe. The baseline is held to the same.
	o.StrictAvailability = true
	defaults := len(mo.Scenarios) == 0
	if defaults {
		mo.Scenarios = KillScenarios(o.Backend)
	}
	if mo.Workers <= 0 {
		mo.Workers = runtime.GOMAXPROCS(0)
	}
	stmts, err := Collect(ctx, o)
	if err != nil {
		return nil, err
	}
	rep.Statements = stmts
	mutants := Generate(stmts)
	args := o.Backend.Equivalent
	used := map[string]bool{}
	for _, m := range mutants {
		if _, ok := args[m.ID]; ok {
			used[m.ID] = true
		}
	}
	for id := range args {
		if !used[id] {
			rep.UnusedArguments = append(rep.UnusedArguments, id)
		}
	}
	sort.Strings(rep.UnusedArguments)
	if len(mo.Only) > 0 {
		var keep []Mutant
		for _, m := range mutants {
			for _, s := range mo.Only {
				if strings.Contains(m.ID, s) {
					keep = append(keep, m)
					break
				}
			}
		}
		if len(keep) == 0 && len(mutants) > 0 {
			// Said before the correct store's runs, not as a score of
			// nothing after them.
			return nil, fmt.Errorf("no generated mutant's ID contains any of %q (%d generated; the first: %q)", mo.Only, len(mutants), mutants[0].ID)
		}
		mutants = keep
	}
	if mo.Limit > 0 && len(mutants) > mo.Limit {
		mutants = mutants[:mo.Limit]
	}
	if mo.Shards > 1 {
		var keep []Mutant
		for p, m := range mutants {
			if p%mo.Shards == mo.Shard {
				keep = append(keep, m)
			}
		}
		if len(keep) == 0 {
			// Said before the correct store's runs, as mutants and soak
			// refuse a shard past their jobs.
			return nil, fmt.Errorf("shard %d/%d has no mutant: %d are to be run in all, fewer than the shards", mo.Shard+1, mo.Shards, len(mutants))
		}
		mutants = keep
	}
	// The settings' mutants also run the scenarios that crash the server
	// and lose replies, when the scenarios are the defaults.
	forSettings := mo.Scenarios
	if defaults && slices.ContainsFunc(mutants, func(m Mutant) bool { return m.Kind == WeakenSetting }) {
		forSettings = slices.Clone(mo.Scenarios)
		for _, sc := range SettingScenarios {
			if !slices.Contains(forSettings, sc) {
				forSettings = append(forSettings, sc)
			}
		}
	}
	rep.Scenarios = forSettings

	results := make([]Result, len(mutants))
	for i, m := range mutants {
		results[i] = Result{Mutant: m, Diff: Diff(m.Orig, m.Text), Argument: args[m.ID]}
	}
	if mo.Planned != nil {
		plan := *rep
		plan.Results = slices.Clone(results)
		mo.Planned(&plan)
	}

	// The correct store first, on the same scenarios and budgets: a
	// checker that fails it would "kill" every mutant.
	all := mo
	all.Scenarios = forSettings
	rep.Baseline = baseline(ctx, o, all)
	if !rep.BaselinePassed() || ctx.Err() != nil {
		rep.Seconds, rep.Interrupted = time.Since(start).Seconds(), ctx.Err() != nil
		return rep, ctx.Err()
	}

	// Two passes: every mutant with the quick budget, then the survivors
	// with the full one.
	total := len(results)
	done := 0
	var mu sync.Mutex
	// final marks the mutants whose last pass ran to its end: a survivor
	// of the quick pass that an interrupt kept from the full one has not
	// survived anything yet.
	final := make([]bool, len(results))
	for pass, budget := range []time.Duration{mo.Quick, mo.Budget} {
		var todo []int
		for i := range results {
			if results[i].Verdict == "" || results[i].Verdict == Survived {
				todo = append(todo, i)
			}
		}
		last := pass == 1 || mo.Budget <= 0
		pool(ctx, mo.Workers, todo, func(i int) {
			r := &results[i]
			scs := mo.Scenarios
			if r.Kind == WeakenSetting {
				scs = forSettings
			}
			if why := noneRan(rep.Baseline, scs); why != "" {
				r.Verdict, r.Error = Unjudged, why
			} else {
				runMutant(ctx, o, scs, budget, mo.Episodes, r)
			}
			final[i] = last && ctx.Err() == nil
			if !last && r.Verdict == Survived {
				return // the second pass decides
			}
			mu.Lock()
			done++
			if mo.Progress != nil {
				mo.Progress(done, total, Settled(*r))
			}
			mu.Unlock()
		})
		if ctx.Err() != nil || mo.Budget <= 0 {
			break
		}
	}
	for i := range results {
		r := &results[i]
		if r.Verdict == "" || (r.Verdict == Survived && !final[i]) { // never begun, or not to its last pass
			r.Verdict = Interrupted
		}
		*r = Settled(*r)
	}
	rep.Results = results
	rep.Tally()
	rep.Seconds, rep.Interrupted = time.Since(start).Seconds(), ctx.Err() != nil
	return rep, ctx.Err()
}

// noneRan says why a mutant whose scenarios are scs can be judged by
// none of them: each was skipped on the correct store (a scenario that
// needs a server, on an embedded store), so it is skipped on the mutant
// too, and a mutant that nothing ran against has not survived anything.
// "" when one of them ran.
func noneRan(baseline []BaselineRun, scs []string) string {
	var why []string
	for _, sc := range scs {
		i := slices.IndexFunc(baseline, func(b BaselineRun) bool { return b.Scenario == sc })
		if i < 0 || baseline[i].Skipped == "" {
			return ""
		}
		why = append(why, sc+": "+baseline[i].Skipped)
	}
	return "nothing was judged: every scenario it would run was skipped on the correct store (" + strings.Join(why, "; ") + ")"
}

// pool runs f on each index with at most n at once.
func pool(ctx context.Context, n int, idx []int, f func(int)) {
	ch := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				f(i)
			}
		}()
	}
	for _, i := range idx {
		if ctx.Err() != nil {
			break
		}
		ch <- i
	}
	close(ch)
	wg.Wait()
}

// runMutant runs the scenarios in order against the mutant, each within
// h's bounds, until one kills it. One that an interrupt cut short before
// a kill is Interrupted, not Survived: its budget was not spent.
func runMutant(ctx context.Context, o harness.Options, scenarios []string, budget time.Duration, episodes int, r *Result) {
	start := time.Now()
	defer func() {
		r.Seconds += time.Since(start).Seconds()
		if r.Verdict == Survived && ctx.Err() != nil {
			r.Verdict = Interrupted
		}
	}()
	o.Edit = r.Edit()
	r.Verdict = Survived
	for _, sc := range scenarios {
		if ctx.Err() != nil {
			return
		}
		h := huntOptions(sc, budget, episodes)
		k, err := huntScenario(ctx, o, sc, h)
		// An error is the edit's only if the correct statements set up:
		// a server that times out under load refuses both.
		for try := 1; err != nil && ctx.Err() == nil && try < setupTries && !correctOpens(ctx, o); try++ {
			if faults.Pause(ctx, time.Duration(try)*time.Second) != nil {
				return
			}
			k, err = huntScenario(ctx, o, sc, h)
		}
		if err != nil {
			if ctx.Err() == nil {
				r.Verdict, r.Error = Invalid, err.Error()
				if !correctOpens(ctx, o) {
					r.Verdict = Unjudged
				}
			}
			return
		}
		r.Episodes += k.Episodes
		if k.Killed {
			r.Verdict, r.Scenario, r.Checker, r.Detail = Killed, sc, k.Checker, k.Detail
			return
		}
	}
}

// huntScenario is hunt.HuntScenario, which runs a scenario that kills and
// restarts the server (scenario.FaultsServer) on a server of its own
// (harness.Options.OwnServer): mutants and the baseline run beside each
// other on the run's server, where a restart would be another run's error
// with no fault of its own recorded. Without a way to start one, the
// scenario is skipped.
func huntScenario(ctx context.Context, o harness.Options, name string, h hunt.Options) (*hunt.Kill, error) {
	if sc, ok := scenario.Lookup(name); ok && o.OwnServer == nil && o.FaultsItsServer(sc) {
		return &hunt.Kill{Scenario: name, Skipped: "it restarts the server, which other mutants share, and this run cannot start one of its own"}, nil
	}
	return hunt.HuntScenario(ctx, o, name, h)
}

// correctOpens reports whether the store opens with the correct
// statements now (Collect), so that a setup error can be told apart: the
// edit's, or the machine's.
func correctOpens(ctx context.Context, o harness.Options) bool {
	o.Edit = nil
	_, err := Collect(ctx, o)
	return err == nil
}

// baseline runs the correct store on each scenario with the full budget.
func baseline(ctx context.Context, o harness.Options, mo Options) []BaselineRun {
	budget := mo.Budget
	if budget <= 0 {
		budget = mo.Quick
	}
	runs := make([]BaselineRun, len(mo.Scenarios))
	idx := make([]int, len(mo.Scenarios))
	for i := range idx {
		idx[i] = i
		runs[i] = BaselineRun{Scenario: mo.Scenarios[i], Interrupted: true} // until it runs
	}
	pool(ctx, mo.Workers, idx, func(i int) {
		start := time.Now()
		b := BaselineRun{Scenario: mo.Scenarios[i]}
		k, err := huntScenario(ctx, o, b.Scenario, huntOptions(b.Scenario, budget, mo.Episodes))
		switch {
		case err == nil && k.Skipped != "":
			b.Passed, b.Skipped = true, k.Skipped
		case err == nil && k.Killed: // caught failing, even if an interrupt came after
			b.Checker, b.Detail = k.Checker, k.Detail
		case ctx.Err() != nil: // cut short: neither a pass nor a failure
			b.Interrupted = true
		case err != nil:
			b.Detail = err.Error()
		default:
			b.Passed = true
		}
		b.Seconds = time.Since(start).Seconds()
		runs[i] = b
		if mo.BaselineDone != nil {
			mo.BaselineDone(b)
		}
	})
	return runs
}

// Diff prints the lines of a statement an edit changed: the old ones with
// "-", the new ones with "+", and the unchanged lines around them with " ".
func Diff(orig, mutated string) []string {
	a, b := strings.Split(orig, "\n"), strings.Split(mutated, "\n")
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []string
	if pre > 0 {
		out = append(out, " "+a[pre-1])
	}
	for _, l := range a[pre : len(a)-suf] {
		out = append(out, "-"+l)
	}
	for _, l := range b[pre : len(b)-suf] {
		out = append(out, "+"+l)
	}
	if suf > 0 {
		out = append(out, " "+a[len(a)-suf])
	}
	return out
}
