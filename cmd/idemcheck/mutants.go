package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

const mutantsHelp = `Usage: idemcheck mutants --store S [--json] [--out DIR] [--seed N] [--seeds N | --seeds A-B] [--mutant M,...] [--parallel N]

Hunts every mutant of the store (its store-side mutants, then the
client-side ones: the correct store with clients that make the mistake)
with the scenario meant to kill it, until a checker fails, and then runs
the correct store on the same scenarios, which must pass. Store-side mutants
die in scheduled scenarios: the controlled scheduler interleaves the
clients' statements, moves the clock past LockTTL and lags clients' clocks,
as a seeded PRNG chooses.

Prints the matrix: each mutant, killed or survived, by which checker, the
seconds from the start of the hunt to the end of the episode (or round)
whose check found the first violation, and the shortest trace. With
--seeds N (N seeds from --seed) or --seeds A-B each mutant is hunted on
every seed and must die on every one; the seconds are then the median over the seeds.

Exit codes: 0 every mutant killed and the correct store passed; 1 a mutant
survived or the correct store failed; 2 bad usage or setup error; 3
undecided (interrupted before every hunt and run finished, with no
failure among those that did, or a run of the correct store undecided).

Each run writes <out>/<time>-<store>-mutants/: journal.jsonl, a line as
each hunt and correct-store run starts and ends, synced to disk, and
summary.json once it ends. A run whose process dies (killed, out of
memory) keeps its journal: 'idemcheck recheck <dir>' reports what
finished and names what did not.

With --shard i/n only every n-th mutant from the i-th is hunted (and the
correct store on their scenarios); 'idemcheck merge' joins the shards'
--json reports into the whole run's matrix and verdict.
`

func cmdMutants(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	def := harness.DefaultOptions()
	fs := newFlagSet("mutants", mutantsHelp)
	store := fs.String("store", "sqlite", "store backend: "+strings.Join(stores.Backends(), ", "))
	seed := fs.Int64("seed", def.Seed, "first seed")
	var seeds seedsFlag
	fs.Var(&seeds, "seeds", seedsHelp+": each mutant must die on every one")
	budget := fs.Duration("budget", time.Minute, "give up on a mutant (it survives) after this long, per seed (checked between rounds: a round begun runs to its end)")
	only := fs.String("mutant", "", "hunt only these mutants (comma-separated)")
	shrinkFor := fs.Duration("shrink", 3*time.Second, "after a scheduled kill (on the first seed), shrink its trace until this long after its hunt began, and for at least a third of it after a late kill (0: off)")
	parallel := fs.Int("parallel", hunt.DefaultParallel, "hunts (a mutant on a seed) run at once, each on its own store (1: one after another)")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	out := fs.String("out", "results", "directory for the run's results directory (its journal and summary)")
	var shard shardFlag
	fs.Var(&shard, "shard", shardHelp)
	execCmd := fs.String("cmd", "", "not for mutants: a store in another language (--store exec) names its bug variants in its hello; check each with check --variant")
	if err := parse(fs, mutantsHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	if *execCmd != "" || *store == "exec" {
		return exitUsage, usagef("mutants hunts the mutants of idemcheck's own stores; a store in another language names its own bug variants in its hello (docs/protocol.md): check each one with idemcheck check --store exec --cmd \"...\" --variant NAME, which must fail, and the correct store with no --variant, which must pass")
	}
	if *parallel < 1 || *parallel > harness.MaxParallel {
		return exitUsage, usagef("--parallel must be between 1 and %d, got %d", harness.MaxParallel, *parallel)
	}
	backend, err := stores.Lookup(*store)
	if err != nil {
		return exitUsage, usageError{err.Error()}
	}
	first, nSeeds, err := seeds.resolve(*seed, given(fs, "seed"), 1, 1000)
	if err != nil {
		return exitUsage, err
	}
	if *budget <= 0 {
		return exitUsage, usagef("--budget must be positive, got %v", *budget)
	}
	if *shrinkFor < 0 {
		return exitUsage, usagef("--shrink must not be negative (0: off), got %v", *shrinkFor)
	}
	var mutants []string
	if *only != "" {
		known := hunt.MutantsFor(backend)
		for _, m := range strings.Split(*only, ",") {
			if !slices.Contains(known, m) {
				return exitUsage, usagef("store %s has no mutant %q (known: %s)", backend.Name, m, strings.Join(known, ", "))
			}
			mutants = append(mutants, m)
		}
	}
	if shard.Of > 0 {
		all := mutants
		if len(all) == 0 {
			all = hunt.MutantsFor(backend)
		}
		mutants = nil
		for p, m := range all {
			if shard.owns(p) {
				mutants = append(mutants, m)
			}
		}
		if len(mutants) == 0 {
			return exitUsage, usagef("--shard %s: store %s has only %s to hunt: use at most %s", shard.String(), backend.Name, plural(len(all), "mutant"), plural(len(all), "shard"))
		}
	}
	if len(mutants) == 0 {
		mutants = hunt.MutantsFor(backend)
	}
	o := def
	o.Backend, o.Seed = backend, first
	started := time.Now()
	dir, err := report.PrepareRunDir(*out, backend.Name, "mutants", started)
	if err != nil {
		return exitUsage, err
	}
	withdraw := jsonAtOnce(*asJSON, stdout, "mutants", dir.Path)
	defer withdraw()
	if !*asJSON {
		sayCrashed(stderr, *out)
	}
	journal, err := createLineJournal(dir, mutantsHead{lineHead: newLineHead(mutantsKind, backend.Name, started, "mutants", args),
		Seed: first, Seeds: nSeeds, Mutants: mutants})
	if err != nil {
		os.RemoveAll(dir.Path)
		return exitUsage, err
	}
	defer journal.Close()
	cleanup, err := provision(ctx, &o, stderr, 0)
	if err != nil {
		os.RemoveAll(dir.Path) // nothing ran
		return exitUsage, err
	}
	defer cleanup()
	mo := hunt.MutantsOptions{Seeds: nSeeds, Mutants: mutants, Hunt: hunt.Options{Budget: *budget, Keys: 2, Shrink: *shrinkFor}, Parallel: *parallel}
	journalMutants(&mo, journal, stderr)
	switch {
	case *asJSON:
	case isTerminal(stderr):
		mo.Progress = func(s string) { fmt.Fprintf(stderr, "\r\033[K%s…", s) }
	default:
		logMutants(&mo, stderr, len(hunt.MatrixJobs(mutants, first, nSeeds)))
	}
	rep, err := hunt.RunMutants(ctx, o, mo)
	if rep != nil {
		rep.Budget = budget.Seconds()
	}
	if mo.Progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil && rep == nil {
		os.RemoveAll(dir.Path) // a setup error: exit 2, not a run
		return exitUsage, err
	}
	sum := mutantsJSON{MutantsReport: rep, Verdict: rep.Verdict(), Interrupted: ctx.Err() != nil, Dir: dir.Path, Shard: shard.info("mutants", args, ctx.Err() != nil)}
	where := saveSummary(stderr, dir.Path, sum, string(sum.Verdict), sum.Interrupted)
	if *asJSON {
		withdraw()
		if err := printJSON(stdout, sum); err != nil {
			return exitUsage, err
		}
		return mutantsCode(rep), nil
	}
	printMutants(stdout, rep)
	if ctx.Err() != nil {
		correct := "the correct store's runs are not all judged"
		if rep.Correct.Verdict == check.Pass {
			// Said of what ran: a fixed sentence said "not all judged"
			// beside "the correct store: pass".
			correct = "the correct store passed the runs it made"
		}
		fmt.Fprintf(stdout, "INTERRUPTED: the hunts cut short are neither killed nor survived, and %s (run it again to finish)\n%s\n", correct, mutantsWhy(rep))
	}
	shard.say(stdout, "mutants")
	fmt.Fprintf(stdout, "Results: %s\n", where)
	return mutantsCode(rep), nil
}

// printSurvivors says, of each hunt that ended without a kill, that it
// gave up at its budget, after how many episodes and how long: a mutant
// given up on at a short --budget was printed SURVIVED, and the run
// FAIL, with nothing naming the budget.
func printSurvivors(w io.Writer, rep *hunt.MutantsReport) {
	budget := "its budget (--budget)"
	if rep.Budget > 0 {
		budget = fmt.Sprintf("its budget (--budget %v)", secondsOf(rep.Budget))
	}
	said := false
	for _, m := range rep.Mutants {
		for _, r := range m.Runs {
			if r.Killed || r.Skipped != "" {
				continue
			}
			if !said {
				fmt.Fprintf(w, "\nnot caught: each hunt below ran until %s was spent, and no checker caught the bug: a longer --budget may kill it; a survivor at the default is a bug the harness misses\n", budget)
				said = true
			}
			what := fmt.Sprintf("%d round(s)", r.Episodes)
			if sc, ok := scenario.Lookup(r.Scenario); ok && sc.Scheduled {
				what = fmt.Sprintf("%d episode(s)", r.Episodes)
			}
			fmt.Fprintf(w, "  %s (%s): %s over %.1fs\n", m.Name, r.Scenario, what, r.Hunted)
		}
	}
}

// printMutants prints the matrix, the correct store's verdict and each
// mutant's shortest trace.
func printMutants(w io.Writer, rep *hunt.MutantsReport) {
	seeds := fmt.Sprintf("seed %d", rep.Seed)
	if rep.Seeds > 1 {
		seeds = fmt.Sprintf("seeds %d..%d", rep.Seed, rep.Seed+int64(rep.Seeds)-1)
	}
	fmt.Fprintf(w, "idemcheck mutants: store %s, %s\n\n", rep.Store, seeds)
	secs := "seconds"
	if rep.Seeds > 1 {
		secs = "median s"
	}
	nw := len("mutant")
	for _, m := range rep.Mutants {
		nw = max(nw, len(m.Name))
	}
	fmt.Fprintf(w, "  %-*s %-6s %-18s %-9s %-20s %8s %8s\n", nw, "mutant", "side", "scenario", "result", "checker", secs, "episodes")
	killed, skipped := 0, 0
	for _, m := range rep.Mutants {
		result := "SURVIVED"
		switch {
		case m.Skipped != "":
			result = "skipped"
			skipped++
		case m.Killed:
			result = "killed"
			killed++
		}
		if rep.Seeds > 1 && m.Skipped == "" {
			result = fmt.Sprintf("%d/%d", m.Kills, m.Seeds)
		}
		if m.Unfinished > 0 && len(m.Runs) == m.Kills && m.Skipped == "" {
			result = "undecided" // no seed survived, some did not finish
		}
		if m.Skipped != "" {
			fmt.Fprintf(w, "  %-*s %-6s %-18s %-9s %s\n", nw, m.Name, m.Side, m.Scenario, result, m.Skipped)
			continue
		}
		episodes := 0
		for _, r := range m.Runs {
			episodes += r.Episodes
		}
		if len(m.Runs) > 0 {
			episodes /= len(m.Runs)
		}
		secs := fmt.Sprintf("%8.3f", m.Seconds)
		if m.Kills == 0 {
			secs = fmt.Sprintf("%8s", "-") // no kill to time
		}
		fmt.Fprintf(w, "  %-*s %-6s %-18s %-9s %-20s %s %8d\n", nw, m.Name, m.Side, m.Scenario, result, m.Checker, secs, episodes)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "seconds: from the start of the hunt to the end of the episode (or round) whose check found the first violation\n")
	printSurvivors(w, rep)
	correct := string(rep.Correct.Verdict)
	if correct == "" {
		correct = "not run"
	}
	fmt.Fprintf(w, "\ncorrect store on the same scenarios: %s\n", strings.ToUpper(correct))
	for _, r := range rep.Correct.Runs {
		if r.Verdict != check.Pass && r.Verdict != check.Skipped {
			fmt.Fprintf(w, "  %s seed %d: %s\n", r.Scenario, r.Seed, r.Verdict)
			if r.Undecided != "" {
				fmt.Fprintf(w, "    undecided: %s\n", r.Undecided)
			}
			for i, v := range r.Violations {
				if i == 3 {
					break
				}
				fmt.Fprintf(w, "    %s on %s: %s\n", v.Checker, v.Key, v.Detail)
			}
		}
	}
	var names []string
	for _, r := range rep.Correct.Runs {
		if !slices.Contains(names, r.Scenario) {
			names = append(names, r.Scenario)
		}
	}
	fmt.Fprintf(w, "  (%s; %d run(s))\n", strings.Join(names, ", "), len(rep.Correct.Runs))
	fmt.Fprintf(w, "\nshortest traces:\n")
	for _, m := range rep.Mutants {
		if len(m.Trace) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (%s, %s):\n  %s\n", m.Name, m.Scenario, m.Checker, m.Detail)
		for _, l := range m.Trace {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	printUnfinished(w, rep)
	verdict := map[check.Verdict]string{check.Pass: "PASS", check.Fail: "FAIL"}[rep.Verdict()]
	if verdict == "" {
		verdict = "UNDECIDED"
	}
	extra := ""
	if skipped > 0 {
		extra = fmt.Sprintf(", %d skipped", skipped)
	}
	if len(rep.Unfinished) > 0 {
		extra += fmt.Sprintf(", %d job(s) not finished", len(rep.Unfinished))
	}
	total := len(rep.Mutants)
	rowless := map[string]bool{} // mutants none of whose hunts finished have no row
	for _, u := range rep.Unfinished {
		if u.Mutant != "" && !rowless[u.Mutant] && !slices.ContainsFunc(rep.Mutants, func(m hunt.MutantReport) bool { return m.Name == u.Mutant }) {
			rowless[u.Mutant] = true
			total++
		}
	}
	fmt.Fprintf(w, "\n%s: %d of %d mutants killed%s; the correct store: %s. %.1fs\n",
		verdict, killed, total, extra, correct, rep.Seconds)
}

// secondsOf is a report's seconds as a duration, to the millisecond.
func secondsOf(f float64) time.Duration {
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond)
}

// logMutants writes a line to a log (stderr not a terminal) as each job
// of the matrix ends, after what mo.Finished already does: a piped
// mutants run of 107 s said nothing until its table, where check, soak
// and mutate each say where they are.
func logMutants(mo *hunt.MutantsOptions, w io.Writer, jobs int) {
	var mu sync.Mutex
	done := 0
	next := mo.Finished
	mo.Finished = func(d hunt.Done) {
		if next != nil {
			next(d)
		}
		mu.Lock()
		defer mu.Unlock()
		done++
		switch {
		case d.Correct != nil:
			fmt.Fprintf(w, "idemcheck: [%d/%d] correct store, %s, seed %d: %s\n", done, jobs, d.Scenario, d.Seed, d.Correct.Verdict)
		case d.Kill.Skipped != "":
			fmt.Fprintf(w, "idemcheck: [%d/%d] %s, seed %d: skipped (%s)\n", done, jobs, d.Mutant, d.Seed, d.Kill.Skipped)
		case d.Kill.Killed:
			fmt.Fprintf(w, "idemcheck: [%d/%d] %s, seed %d: killed by %s in %.1fs\n", done, jobs, d.Mutant, d.Seed, d.Kill.Checker, d.Kill.Seconds)
		default:
			fmt.Fprintf(w, "idemcheck: [%d/%d] %s, seed %d: survived %.1fs of hunting\n", done, jobs, d.Mutant, d.Seed, d.Kill.Seconds)
		}
	}
}
