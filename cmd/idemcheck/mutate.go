package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/mutate"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

const mutateHelp = `Usage: idemcheck mutate --store S [--json] [--out DIR] [--seed N] [--quick D] [--budget D] [--episodes N] [--workers N] [--min-score P]

Generates mutants from the store's own statements and scripts (the texts it
passes through stores.Config.Statements at open): each conjunct of each
WHERE or condition dropped, each comparison flipped, each SET column (Lua
HSET field) dropped, each Lua guard dropped, each status literal swapped,
each ordering comparison shifted across its boundary, each equality with a
parameter made a LIKE, each of its settings (isolation, durability, a
client's retries) weakened to one a deployment may have; one edit of one
statement per mutant. Runs the scenarios that kill the
store's hand-written mutants, then race and error (many keys of one tenant
at once, every call of the contract), and for a weakened setting also
store-faults, lost-reply and workers, against each (in order, stopping at
the first kill; every mutant with --quick per scenario, then the survivors with
--budget), after the correct store has passed the same scenarios.
Availability is judged strictly (as check --strict-availability): a store
that answers contention with errors where a 409 is owed is killed.

Prints every mutant: killed (by which scenario and checker), survived (with
the diff of its statement), equivalent (with the argument the backend gives
for it, in its Equivalent table; an argued mutant that a checker kills is
reported as a refuted argument), or invalid (the store would not run the
edit). The score is killed / (killed + survived).

A backend whose logic is Go code (memory, lease) has no statements: it is
reported as not applicable, with the reason.

Exit codes: 0 the correct store passed and the score is at least
--min-score (or the backend is not applicable); 1 the score is lower, or
the correct store failed (even if interrupted after); 2 bad usage or setup
error (--only matching no mutant too); 3 interrupted (what it judged is
printed; a mutant cut short is "interrupted", never a survivor), no mutant
scored (all equivalent or invalid), or a mutant could not be judged.

The run's results directory under --out keeps its journal (its plan, the
correct store's runs, each mutant's verdict as it comes) and, once it
ends, summary.json: a run whose process died is reported by
'idemcheck recheck <dir>' from its journal.

With --shard i/n only every n-th generated mutant from the i-th is run (the
correct store on every scenario in each shard); 'idemcheck merge' joins the
shards' --json reports into the whole run's verdict and score.
`

func cmdMutate(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	def := harness.DefaultOptions()
	fs := newFlagSet("mutate", mutateHelp)
	store := fs.String("store", "sqlite", "store backend: "+strings.Join(stores.Backends(), ", "))
	seed := fs.Int64("seed", def.Seed, "seed")
	quick := fs.Duration("quick", time.Second, "each scenario's budget per mutant in the first pass")
	budget := fs.Duration("budget", 6*time.Second, "each scenario's budget per survivor of the first pass (0: one pass)")
	workers := fs.Int("workers", 0, "mutants run at once (0: GOMAXPROCS)")
	episodes := fs.Int("episodes", 0, "also stop each scenario after this many episodes or rounds per mutant (0: the budgets only)")
	scenarios := fs.String("scenario", "", "scenarios to try, in order (comma-separated; default: those that kill the store's hand-written mutants, then race and error)")
	only := fs.String("only", "", "run only the mutants whose ID contains one of these (comma-separated)")
	limit := fs.Int("limit", 0, "run only the first N mutants generated (0: all)")
	minScore := fs.Float64("min-score", 0.95, "the lowest passing score")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	out := fs.String("out", "results", "directory for the run's results directory (its journal and summary)")
	var shard shardFlag
	fs.Var(&shard, "shard", shardHelp)
	execCmd := fs.String("cmd", "", "not for mutate: a store in another language (--store exec) is not edited by idemcheck; check each edit of its own with check --store exec")
	if err := parse(fs, mutateHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	if *execCmd != "" || *store == "exec" {
		return exitUsage, usagef("mutate edits the SQL statements and Lua scripts of idemcheck's own stores; a store in another language is not edited by idemcheck: make each edit of its own code and check it with idemcheck check --store exec --cmd \"...\", which must fail (or name it a bug variant in its hello: docs/protocol.md)")
	}
	backend, err := stores.Lookup(*store)
	if err != nil {
		return exitUsage, usageError{err.Error()}
	}
	if *minScore < 0 || *minScore > 1 || *minScore != *minScore {
		return exitUsage, usagef("--min-score is a fraction of the mutants scored, from 0 to 1 (0.95: 95%%), not %v", *minScore)
	}
	if *quick <= 0 || *budget < 0 || *workers < 0 || *limit < 0 || *episodes < 0 {
		return exitUsage, usagef("--quick must be positive; --budget, --workers, --limit and --episodes not negative")
	}
	mo := mutate.Options{Quick: *quick, Budget: *budget, Workers: *workers, Limit: *limit, Episodes: *episodes, Shard: shard.Index - 1, Shards: shard.Of}
	if *only != "" {
		mo.Only = strings.Split(*only, ",")
	}
	if *scenarios != "" {
		for _, s := range strings.Split(*scenarios, ",") {
			if _, ok := scenario.Lookup(s); !ok {
				return exitUsage, usagef("unknown scenario %q (known: %s)", s, scenario.NamesString())
			}
			mo.Scenarios = append(mo.Scenarios, s)
		}
	}
	o := def
	o.Backend, o.Seed = backend, *seed
	terminal := !*asJSON && isTerminal(stderr)
	if terminal {
		mo.Progress = func(done, total int, r mutate.Result) {
			fmt.Fprintf(stderr, "\r\033[K[%d/%d] %s: %s…", done, total, r.ID, r.Verdict)
		}
	}
	dirPath := ""
	withdraw := func() {} // a stop at once's object (jsonAtOnce)
	if backend.Statements {
		// A results directory with the run's journal: a run whose
		// process dies is reported from it (recheck).
		started := time.Now()
		dir, err := report.PrepareRunDir(*out, backend.Name, "mutate", started)
		if err != nil {
			return exitUsage, err
		}
		withdraw = jsonAtOnce(*asJSON, stdout, "mutate", dir.Path)
		defer withdraw()
		if !*asJSON {
			sayCrashed(stderr, *out)
		}
		journal, err := createLineJournal(dir, mutateHead{lineHead: newLineHead(mutateKind, backend.Name, started, "mutate", args),
			Seed: *seed, MinScore: *minScore})
		if err != nil {
			os.RemoveAll(dir.Path)
			return exitUsage, err
		}
		defer journal.Close()
		journalMutate(&mo, journal, stderr)
		cleanup, err := provision(ctx, &o, stderr, 0)
		if err != nil {
			os.RemoveAll(dir.Path) // nothing ran
			return exitUsage, err
		}
		defer cleanup()
		dirPath = dir.Path
	}
	if !terminal {
		logMutate(&mo, stderr)
	}
	rep, err := mutate.Run(ctx, o, mo)
	if terminal {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if err != nil && rep == nil {
		if dirPath != "" {
			os.RemoveAll(dirPath) // a setup error, or an interrupt before anything ran: not a run
		}
		if ctx.Err() != nil {
			const why = "interrupted before the correct store or any mutant ran"
			withdraw()
			if *asJSON { // one object still
				return exitUnknown, printJSON(stdout, map[string]any{"verdict": "unknown", "interrupted": true, "why": why})
			}
			fmt.Fprintln(stdout, "UNDECIDED: "+why)
			return exitUnknown, nil
		}
		return exitUsage, err
	}
	rep.Interrupted = rep.Interrupted || ctx.Err() != nil
	sum := mutateJSON{Report: rep, MinScore: *minScore, Verdict: codeVerdict(mutateExit(rep, *minScore)), Dir: dirPath, Shard: shard.info("mutate", args, rep.Interrupted)}
	if sum.Shard != nil {
		sum.Shard.MinScore = *minScore
	}
	where := dirPath
	if dirPath != "" {
		_, word := mutateVerdict(rep, *minScore)
		where = saveSummary(stderr, dirPath, sum, strings.Fields(word)[0], rep.Interrupted)
	}
	if *asJSON {
		withdraw()
		if err := printJSON(stdout, sum); err != nil {
			return exitUsage, err
		}
	} else {
		printMutate(stdout, rep, *minScore)
		shard.say(stdout, "mutate")
		if dirPath != "" {
			fmt.Fprintf(stdout, "Results: %s\n", where)
		}
	}
	return mutateExit(rep, *minScore), nil
}

// mutateExit is a mutation report's exit code, for a run and for a merge
// of shards (an interrupted run, or shard, has rep.Interrupted set), from
// [mutateVerdict].
func mutateExit(rep *mutate.Report, minScore float64) int {
	code, _ := mutateVerdict(rep, minScore)
	return code
}

// mutateVerdict is a mutation report's verdict, its exit code and the
// word its last line starts with: a failure when the correct store was
// caught failing (an interrupt after that changes nothing), undecided
// when interrupted, a pass where nothing applies, a failure when an
// argument matches no mutant, undecided when no mutant was scored (all
// equivalent or invalid: a score of nothing is not a pass, nor a
// failure), a failure when the score is low, undecided when a mutant
// could not be judged.
func mutateVerdict(rep *mutate.Report, minScore float64) (int, string) {
	switch {
	case rep.BaselineFailed():
		return exitFail, "FAIL"
	case (rep.Interrupted || rep.Counts.Interrupted > 0) && rep.Survived > 0 && bestScore(rep) < minScore:
		// Every mutant not judged killed would still leave the score
		// low: what the run judged proves the failure (it said nothing
		// it finished did, beside one survivor in eight, at 95%).
		return exitFail, fmt.Sprintf("FAIL (interrupted; the survivors judged already keep the score at most %.1f%%, below %.0f%%, whatever the rest)", 100*bestScore(rep), 100*minScore)
	case rep.Interrupted || rep.Counts.Interrupted > 0:
		return exitUnknown, "UNDECIDED (interrupted; the score of the mutants judged before it)"
	case rep.NotApplicable != "":
		return exitPass, "PASS"
	case !rep.BaselinePassed() || len(rep.UnusedArguments) > 0:
		return exitFail, "FAIL"
	case rep.Killed+rep.Survived == 0:
		return exitUnknown, "UNDECIDED (no mutant was scored: nothing was judged)"
	case rep.Score < minScore:
		return exitFail, "FAIL"
	case rep.Unjudged > 0:
		return exitUnknown, "UNDECIDED"
	}
	return exitPass, "PASS"
}

// bestScore is the highest score an interrupted run could still reach:
// every mutant it did not judge killed.
func bestScore(rep *mutate.Report) float64 {
	k := float64(rep.Killed + rep.Counts.Interrupted)
	return k / (k + float64(rep.Survived))
}

// mutateJSON is mutate's --json report and its summary.json: with
// --shard, what the merge needs.
type mutateJSON struct {
	*mutate.Report
	// MinScore is the lowest passing score the verdict was given with.
	MinScore float64 `json:"min_score"`
	// Verdict is the run's, as its exit code says ([mutateVerdict]).
	Verdict check.Verdict `json:"verdict"`
	// Recovered: read back from the journal of a run whose process died.
	Recovered bool       `json:"recovered,omitempty"`
	Dir       string     `json:"results_dir,omitempty"`
	Shard     *shardInfo `json:"shard,omitempty"`
}

// printMutate prints the table, then the survivors with their diffs, the
// equivalent mutants with their arguments, and the score.
func printMutate(w io.Writer, rep *mutate.Report, minScore float64) {
	fmt.Fprintf(w, "idemcheck mutate: store %s, seed %d\n", rep.Store, rep.Seed)
	if rep.NotApplicable != "" {
		fmt.Fprintf(w, "\nnot applicable: %s\n", rep.NotApplicable)
		return
	}
	names := make([]string, len(rep.Statements))
	for i, s := range rep.Statements {
		names[i] = s.Name
	}
	fmt.Fprintf(w, "statements: %s\nscenarios: %s\n\n", strings.Join(names, ", "), strings.Join(rep.Scenarios, ", "))
	fmt.Fprintf(w, "correct store on the same scenarios:\n")
	for _, b := range rep.Baseline {
		switch {
		case b.Interrupted:
			fmt.Fprintf(w, "  %-16s not finished: the run was interrupted\n", b.Scenario)
		case b.Skipped != "":
			fmt.Fprintf(w, "  %-16s skipped: %s\n", b.Scenario, b.Skipped)
		case b.Passed:
			fmt.Fprintf(w, "  %-16s pass (%.1fs)\n", b.Scenario, b.Seconds)
		default:
			fmt.Fprintf(w, "  %-16s FAIL %s: %s\n", b.Scenario, b.Checker, b.Detail)
		}
	}
	if rep.BaselineFailed() {
		fmt.Fprintf(w, "\nFAIL: the correct store failed: no mutant was run (a kill would mean nothing)\n")
		return
	}
	if !rep.BaselinePassed() {
		fmt.Fprintf(w, "\nUNDECIDED: the run was interrupted before the correct store finished its scenarios: no mutant was run\n")
		return
	}
	fmt.Fprintf(w, "\n  %-11s %-60s %-16s %-14s %7s\n", "verdict", "mutant", "scenario", "checker", "seconds")
	var cut []string
	for _, r := range rep.Results {
		if r.Verdict == mutate.Interrupted {
			cut = append(cut, r.ID)
			continue
		}
		fmt.Fprintf(w, "  %-11s %-60s %-16s %-14s %7.1f\n", r.Verdict, r.ID, r.Scenario, r.Checker, r.Seconds)
	}
	if len(cut) > 0 {
		const shown = 8
		fmt.Fprintf(w, "\nnot judged: %d mutant(s), interrupted before their verdict (cut short, or never begun; not scored)\n", len(cut))
		for i, id := range cut {
			if i == shown {
				fmt.Fprintf(w, "  and %d more\n", len(cut)-shown)
				break
			}
			fmt.Fprintf(w, "  %s\n", id)
		}
	}
	section := func(verdict, title string, body func(mutate.Result)) {
		first := true
		for _, r := range rep.Results {
			if r.Verdict != verdict {
				continue
			}
			if first {
				fmt.Fprintf(w, "\n%s:\n", title)
				first = false
			}
			fmt.Fprintf(w, "\n  %s\n", r.ID)
			body(r)
		}
	}
	diff := func(r mutate.Result) {
		for _, l := range r.Diff {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	section(mutate.Survived, survivorsTitle(rep), diff)
	section(mutate.Equivalent, "equivalent (the backend's argument; run anyway, and not killed)", func(r mutate.Result) {
		fmt.Fprintf(w, "    because %s\n", r.Argument)
		diff(r)
	})
	section(mutate.Refuted, "refuted arguments (argued equivalent, and killed)", func(r mutate.Result) {
		fmt.Fprintf(w, "    argued: %s\n    killed by %s in %s: %s\n", r.Argument, r.Checker, r.Scenario, r.Detail)
	})
	section(mutate.Invalid, "invalid (the store would not run the edit; not scored)", func(r mutate.Result) {
		fmt.Fprintf(w, "    %s\n", r.Error)
	})
	section(mutate.Unjudged, "unjudged (not scored: nothing ran against them, or the store did not open with the correct statements either, the machine's or the server's failure, not the edit's; the reason under each)", func(r mutate.Result) {
		fmt.Fprintf(w, "    %s\n", r.Error)
	})
	for _, id := range rep.UnusedArguments {
		fmt.Fprintf(w, "\nunused equivalence argument (no generated mutant has this ID): %s\n", id)
	}
	_, verdict := mutateVerdict(rep, minScore)
	if len(rep.Kinds) > 0 {
		fmt.Fprintf(w, "\n  %-16s %7s %9s %11s %8s %7s\n", "rewrite", "killed", "survived", "equivalent", "invalid", "score")
		for _, k := range rep.Kinds {
			score := "-"
			if k.Killed+k.Survived > 0 {
				score = fmt.Sprintf("%.1f%%", 100*k.Score)
			}
			fmt.Fprintf(w, "  %-16s %7d %9d %11d %8d %7s\n", k.Kind, k.Killed, k.Survived, k.Equivalent, k.Invalid, score)
		}
	}
	unjudged := ""
	if rep.Unjudged > 0 {
		unjudged = fmt.Sprintf(", %d unjudged", rep.Unjudged)
	}
	if rep.Counts.Interrupted > 0 {
		unjudged += fmt.Sprintf(", %d not judged: interrupted", rep.Counts.Interrupted)
	}
	score := "no score"
	if rep.Killed+rep.Survived > 0 {
		score = fmt.Sprintf("score %.1f%%", 100*rep.Score)
	}
	fmt.Fprintf(w, "\n%s: %s (%d killed of %d not equivalent; %d equivalent, %d invalid%s; %d generated). %.1fs\n",
		verdict, score, rep.Killed, rep.Killed+rep.Survived, rep.Equivalent, rep.Invalid, unjudged, len(rep.Results), rep.Seconds)
}

// survivorsTitle heads the survivors: within what budgets no checker
// caught them, and which scenarios were skipped on the store, so ran
// against none of them. Survivors at a short --budget, or of a weakened
// setting whose scenarios (a server killed) cannot run on an embedded
// store, read as the harness's misses with nothing said.
func survivorsTitle(rep *mutate.Report) string {
	title := "survivors (no scenario's checkers caught them"
	if rep.Budget > 0 || rep.Quick > 0 {
		title += fmt.Sprintf(", each given --quick %v", secondsOf(rep.Quick))
		if rep.Budget > 0 {
			title += fmt.Sprintf(" then --budget %v", secondsOf(rep.Budget))
		}
		title += " per scenario: a longer budget may kill some"
	}
	var skipped []string
	for _, b := range rep.Baseline {
		if b.Skipped != "" {
			skipped = append(skipped, fmt.Sprintf("%s (%s)", b.Scenario, b.Skipped))
		}
	}
	if len(skipped) > 0 {
		title += "; skipped on this store, so run against none: " + strings.Join(skipped, "; ")
	}
	return title + ")"
}
