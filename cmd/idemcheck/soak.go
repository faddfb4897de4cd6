package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/internal/buildinfo"
	"github.com/idemcheck/idemcheck/stores"
)

const soakHelp = `Usage: idemcheck soak --store S [--seeds N | --seeds A-B] [--seed FIRST] [--scenario S|all] [--hogs K]
                     [--lock-ttl D] [--retention D] [--keys N] [--clients N] [--json]

Runs every scenario (or those named) on N consecutive seeds, one check run
per seed, with K processes spinning on the CPU beside it (default: one per
core), so that the harness and the store run on a loaded machine, as CI
machines are. It is how the harness proves it gives no false alarm: on a
correct store every run must pass. A run that does not pass keeps its
results directory under --out and is listed with its reproduce line.
--lock-ttl, --retention, --keys and --clients set every run's, as they
set check's (a store's production settings soaked, not only the
defaults).

The soak keeps <out>/<time>-<store>-soak/: journal.jsonl, a line as each
seed's run starts and ends, synced to disk, and summary.json once it
ends. A soak whose process dies keeps its journal: 'idemcheck recheck
<dir>' reports the seeds that ended and names those that did not.

Prints, per scenario, how many runs passed, failed, were undecided or
skipped, and their seconds added up (runs side by side each count
theirs), then the soak's wall time. Exit codes: 0 every run passed, 1 a run
failed, 2 bad usage or setup error, 3 a run was undecided or interrupted,
or nothing was judged (every scenario run was skipped on the store).

With --random-flags each seed is instead one draw of every flag a user may
set, each from its allowed range (--lock-ttl 50ms to 10m, --retention 1s to
24h, --keys, --clients, --count, --parallel, --duration, a subset of the
scenarios, the seed; --strict-availability when the drawn seed divides by 3,
--strict-retention by 5), the draws numbered from --draw-seed: a property test of the harness itself, in
which a correct store must pass every draw. A draw keeps the scenarios
that fit --budget (a forecast of wall time, and of the calls it records);
one that does not pass prints the check command that runs it again.
Each draw's files (history, summary, reports) are written as check writes
them, and removed once it passed: the reports meet the drawn flags too.

With --shard i/n only every n-th run (seed × scenario, seed-major; with
--random-flags, every n-th draw) from the i-th is done; 'idemcheck merge'
joins the shards' --json reports.

A store in another language soaks as it checks: --store exec --cmd
"python3 mystore.py" (or --config FILE); a drawn run's check command then
names the same --cmd. A store that breaks the protocol stops the soak:
one line names the line, exit 2.
`

// soakRow counts one scenario's runs over the seeds.
type soakRow struct {
	Scenario string  `json:"scenario"`
	Pass     int     `json:"pass"`
	Fail     int     `json:"fail"`
	Unknown  int     `json:"unknown"`
	Skipped  int     `json:"skipped"`
	Seconds  float64 `json:"seconds"`
}

// soakReport is what --json prints.
type soakReport struct {
	Store   string `json:"store"`
	Variant string `json:"variant"`
	Seed    int64  `json:"seed"`
	Seeds   int    `json:"seeds"`
	Hogs    int    `json:"hogs"`
	// HogsNote says how many hogs died during the soak and were started
	// again, or could not be ("": none died).
	HogsNote string `json:"hogs_note,omitempty"`
	// Parallel is how many scenarios ran at once in each seed's run.
	Parallel int `json:"parallel"`
	// Settings are every run's LockTTL, retention, keys and clients
	// ("" with --random-flags, which draws them for each run).
	Settings string `json:"settings,omitempty"`
	// Commit is the build's commit ("+dirty" if modified), so a soak's
	// counts say which code they are for.
	Commit string    `json:"commit,omitempty"`
	Rows   []soakRow `json:"scenarios"`
	Bad    []string  `json:"not_passed"` // results directories of runs that did not pass
	// Errors are the seeds whose run could not be made (a setup error,
	// such as a server that did not come back): the soak goes on with the
	// next seed and ends with exit 2.
	Errors  []string `json:"errors,omitempty"`
	Seconds float64  `json:"seconds"`
	// Draws, with --random-flags, is each drawn run's check command, in
	// order; BadDraws those that did not pass.
	Draws    []string `json:"draws,omitempty"`
	BadDraws []string `json:"not_passed_draws,omitempty"`
	// Journal is the file each finished run was appended to (soakEntry
	// lines): what survives a soak that is killed.
	Journal string `json:"journal,omitempty"`
	// Journals, in a merge of shards, are every shard's Journal (a
	// merge named only the first's).
	Journals []string `json:"journals,omitempty"`
	// Interrupted says the soak was cut short (Ctrl-C, SIGTERM); Ran
	// counts the seeds (draws) whose run ended, the cut one included.
	Interrupted bool `json:"interrupted,omitempty"`
	Ran         int  `json:"ran"`
	// Plan is the scenarios in order; Shard, with --shard, what the merge needs.
	Plan  []string   `json:"plan,omitempty"`
	Shard *shardInfo `json:"shard,omitempty"`
	// Verdict is the soak's (soakCode); Unfinished the seeds (draws) of a
	// soak cut short that did not end; Recovered says this report was
	// read back from the journal of a soak whose process died.
	Verdict    check.Verdict    `json:"verdict,omitempty"`
	Unfinished []soakUnfinished `json:"unfinished,omitempty"`
	Recovered  bool             `json:"recovered,omitempty"`
}

func cmdSoak(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	def := harness.DefaultOptions()
	fs := newFlagSet("soak", soakHelp)
	store := fs.String("store", "sqlite", "store backend: "+strings.Join(stores.Backends(), ", ")+", or exec (with --cmd)")
	variant := fs.String("variant", stores.Correct, "store variant (a soak is meant for the correct one)")
	scenarioF := fs.String("scenario", "all", "scenarios to run, or all")
	var seedsF seedsFlag
	fs.Var(&seedsF, "seeds", seedsHelp+" (default 10 from --seed)")
	seed := fs.Int64("seed", 1, "the first seed")
	hogs := fs.Int("hogs", runtime.NumCPU(), "CPU-spinning processes beside the run (0: none)")
	out := fs.String("out", "results", "directory for the soak's results directory (its journal and summary) and those of runs that do not pass")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	var shard shardFlag
	fs.Var(&shard, "shard", shardHelp+" (runs are seed × scenario)")
	randomFlags := fs.Bool("random-flags", false, "draw every flag of each run from its allowed range (see above)")
	drawSeed := fs.Int64("draw-seed", 1, "with --random-flags: the seed of the draws")
	budget := fs.Duration("budget", 30*time.Second, "with --random-flags: the longest forecast wall time of one drawn run")
	clients := fs.Int("clients", def.Clients, "concurrent clients per scenario, in every run (not with --random-flags, which draws it)")
	keys := fs.Int("keys", def.Keys, "keys (orders) per scenario, in every run (not with --random-flags)")
	lockTTL := fs.Duration("lock-ttl", def.LockTTL, "the stores' LockTTL, in every run (not with --random-flags)")
	retention := fs.Duration("retention", def.Retention, "how long the stores keep a key, in every run (not with --random-flags)")
	sf := addStoreFlags(fs)
	if err := parse(fs, soakHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	backend, ex, err := sf.lookup(ctx, fs, store, variant)
	if err != nil {
		return exitUsage, err
	}
	if !*randomFlags {
		// Accepted and ignored, they read as if they had steered the run.
		for _, name := range []string{"draw-seed", "budget"} {
			if given(fs, name) {
				return exitUsage, usagef("--%s is for --random-flags, which this soak is not", name)
			}
		}
	} else {
		for _, name := range []string{"clients", "keys", "lock-ttl", "retention"} {
			if given(fs, name) {
				return exitUsage, usagef("--%s: --random-flags draws it for each run; leave one of the two out", name)
			}
		}
	}
	firstSeed, nSeeds, err := seedsF.resolve(*seed, given(fs, "seed"), 10, 100_000)
	if err != nil {
		return exitUsage, err
	}
	if *hogs < 0 || *hogs > 64 {
		return exitUsage, usagef("--hogs must be between 0 and 64, got %d", *hogs)
	}
	o := def
	o.Backend, o.Variant = backend, *variant
	o.Clients, o.Keys, o.LockTTL, o.Retention = *clients, *keys, *lockTTL, *retention
	if *scenarioF != "all" {
		o.Scenarios = strings.Split(*scenarioF, ",")
	}
	if err := o.Validate(); err != nil {
		return exitUsage, usageError{err.Error()}
	}
	cleanup, err := provision(ctx, &o, stderr, 0)
	if err != nil {
		return exitUsage, err
	}
	defer cleanup()
	// An exec store's workers start its command; a protocol error cancels
	// the soak's runs (ctx from here on) and is its error.
	ctx, workers, protocolErr := execRun(ctx, ex, o.WorkerCommand)
	o.WorkerCommand = workers
	hogPool, err := startHogs(*hogs)
	if err != nil {
		return exitUsage, err
	}
	defer hogPool.stop()

	start := time.Now()
	rep := soakReport{Store: backend.Name, Variant: o.Variant, Seed: firstSeed, Seeds: nSeeds, Hogs: *hogs, Parallel: o.Parallel,
		Commit: buildinfo.Get().Revision(), Bad: []string{}}
	if !*randomFlags {
		rep.Settings = fmt.Sprintf("LockTTL %v, retention %v, %d keys, %d clients", o.LockTTL, o.Retention, o.Keys, o.Clients)
	}
	var tally soakTally
	progress := isTerminal(stderr) && !*asJSON
	interrupted, began := false, int64(-1)
	plan := o.Scenarios
	if len(plan) == 0 {
		plan = scenario.Default()
	}
	if shard.Of > 0 {
		if shard.Of > nSeeds*len(plan) {
			return exitUsage, usagef("--shard %s: only %s (seeds × scenarios): use at most %s", shard.String(), plural(nSeeds*len(plan), "run"), plural(nSeeds*len(plan), "shard"))
		}
		rep.Plan = plan
	}
	// The seeds (draws) this soak runs: with --shard, those of its runs.
	var planned []int64
	for i := 0; i < nSeeds; i++ {
		owned := *randomFlags && shard.owns(i)
		for j := range plan {
			owned = owned || !*randomFlags && shard.owns(i*len(plan)+j)
		}
		if owned {
			planned = append(planned, firstSeed+int64(i))
		}
	}
	dir, err := report.PrepareRunDir(*out, backend.Name, "soak", start)
	if err != nil {
		return exitUsage, err
	}
	withdraw := jsonAtOnce(*asJSON, stdout, "soak", dir.Path)
	defer withdraw()
	if !*asJSON {
		sayCrashed(stderr, *out)
	}
	journal, err := createLineJournal(dir, soakHead{lineHead: newLineHead(soakKind, backend.Name, start, "soak", args),
		Variant: o.Variant, Seeds: planned, Plan: plan, Hogs: *hogs, Parallel: o.Parallel})
	if err != nil {
		os.RemoveAll(dir.Path)
		return exitUsage, err
	}
	defer journal.Close()
	if !*asJSON {
		fmt.Fprintf(stderr, "idemcheck soak: each run is recorded as it ends in %s\n", journal.path)
	}
	rep.Journal = journal.path
	addEntry := journal.adder(stderr)
	for i := 0; i < nSeeds; i++ {
		if ctx.Err() != nil {
			interrupted = true
			break
		}
		oo := o
		oo.Seed = firstSeed + int64(i)
		oo.Scenarios = nil // this shard's runs of the seed: run p = i × len(plan) + j is scenario j on seed i
		for j, name := range plan {
			if shard.owns(i*len(plan) + j) {
				oo.Scenarios = append(oo.Scenarios, name)
			}
		}
		var drawn string
		if *randomFlags {
			if shard.Of > 0 && !shard.owns(i) {
				continue
			}
			d, cmd := drawRun(*drawSeed, firstSeed+int64(i), o, drawBudget{Time: *budget, Calls: maxDrawCalls})
			if ex != nil { // the check command that runs the draw again names the store's command
				cmd = strings.Replace(cmd, "--store "+backend.Name+" ", fmt.Sprintf("--store exec --cmd %q ", ex.Line), 1)
			}
			oo, drawn = d, cmd
			rep.Draws = append(rep.Draws, cmd)
		}
		if len(oo.Scenarios) == 0 {
			continue
		}
		if progress {
			fmt.Fprintf(stderr, "\r\033[K[%d/%d] seed %d, %d run(s) not passed so far, %s elapsed", i+1, nSeeds, oo.Seed, len(rep.Bad), time.Since(start).Round(time.Second))
		}
		var number int64 // the draw's, in the plan (oo.Seed is the seed drawn)
		if *randomFlags {
			number = firstSeed + int64(i)
		}
		if !*asJSON {
			dp := &drawProgress{w: stderr, terminal: progress, i: i + 1, n: nSeeds, seed: oo.Seed, forecast: oo.Estimate(), slowReason: slowReason(ex != nil)}
			oo.Progress, oo.ProgressEvery = dp.report, dp.every()
		}
		addEntry(soakEntry{Type: "began", Seed: oo.Seed, Draw: drawn, DrawNumber: number})
		began = soakEntry{Seed: oo.Seed, DrawNumber: number}.planned()
		t0 := time.Now()
		sum, err := harness.Run(ctx, oo)
		if err != nil {
			if ctx.Err() != nil {
				interrupted = true
				break
			}
			e := soakEntry{Type: "seed", Seed: oo.Seed, Draw: drawn, DrawNumber: number, Verdict: "error", Error: err.Error(), At: time.Now().UTC().Format(time.RFC3339), Secs: time.Since(t0).Seconds()}
			tally.add(&rep, e)
			addEntry(e)
			continue
		}
		entry := entryOf(oo.Seed, drawn, sum, time.Since(t0))
		entry.DrawNumber = number
		if sum.Interrupted {
			interrupted = true
		}
		// A run that did not pass keeps its files. A drawn run's are
		// written too, as check writes them, and removed once it passed:
		// the reports are part of what a user's flags reach (one draw's
		// HTML report once took 9 minutes and 22 GB). As check does, a
		// report that cannot be written is said, and the soak goes on
		// with the verdict counted.
		if keep := !judgedWell(sum.Verdict) && !sum.Interrupted; keep || *randomFlags && !sum.Interrupted {
			root, variant := *out, o.Variant // the seed's own directory
			if keep {
				stamp(sum, append([]string{"idemcheck", "soak"}, args...))
			} else {
				root, variant = dir.Path, "draw" // inside the soak's, for a moment
			}
			w0 := time.Now()
			rd, err := report.PrepareRunDir(root, backend.Name, variant, w0)
			var errs []error
			if err != nil {
				errs = append(errs, err)
			} else {
				rd.Older = !keep
				errs = writeRun(rd, sum, "")
				if keep {
					entry.Dir = rd.Path
				} else if err := os.RemoveAll(rd.Path); err != nil {
					errs = append(errs, err)
				}
			}
			entry.WriteSecs = time.Since(w0).Seconds()
			for _, err := range errs {
				fmt.Fprintf(stderr, "idemcheck soak: seed %d: writing results: %v (the verdict stands)\n", oo.Seed, err)
			}
		}
		tally.add(&rep, entry)
		addEntry(entry)
		if !progress && !*asJSON {
			fmt.Fprintf(stderr, "[%d/%d] seed %d: %s, %d scenario run(s), %.1fs%s\n", i+1, nSeeds, oo.Seed, sum.Verdict, len(sum.Scenarios), entry.Secs, writing(entry.WriteSecs))
		}
	}
	if progress {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if perr := protocolErr(); perr != nil {
		return exitUsage, perr
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.HogsNote = hogPool.note()
	rep.Shard = shard.info("soak", args, interrupted)
	rep.Interrupted = rep.Interrupted || interrupted
	tally.finish(&rep, planned, began, rep.Interrupted)
	code, why := soakCode(rep)
	rep.Verdict = codeVerdict(code)
	saveSummary(stderr, dir.Path, rep, string(rep.Verdict), rep.Interrupted)
	if *asJSON {
		withdraw()
		if err := printJSON(stdout, rep); err != nil {
			return exitUsage, err
		}
	} else {
		printSoak(stdout, rep)
		if rep.Interrupted {
			fmt.Fprintln(stdout, why)
		}
		shard.say(stdout, "soak")
	}
	if code == exitUsage {
		return exitUsage, fmt.Errorf("soak: %d seed(s) could not run (setup errors above)", len(rep.Errors))
	}
	return code, nil
}

func printSoak(w io.Writer, rep soakReport) {
	seeds := fmt.Sprintf("seeds %d..%d", rep.Seed, rep.Seed+int64(rep.Seeds)-1)
	if len(rep.Draws) > 0 {
		// Each draw has a --seed of its own (in its command, below).
		seeds = fmt.Sprintf("draws %d..%d of --random-flags", rep.Seed, rep.Seed+int64(rep.Seeds)-1)
	}
	fmt.Fprintf(w, "idemcheck soak: store %s, variant %s, %s, %d CPU hog(s)\n", rep.Store, rep.Variant, seeds, rep.Hogs)
	if rep.Settings != "" {
		fmt.Fprintf(w, "every run at %s\n", rep.Settings)
	}
	if rep.HogsNote != "" {
		fmt.Fprintln(w, rep.HogsNote)
	}
	fmt.Fprintln(w)
	// A scenario's seconds add up its runs', which may run side by side
	// (--parallel): not its share of the wall time.
	fmt.Fprintf(w, "  %-20s %6s %6s %8s %8s %9s\n", "scenario", "pass", "fail", "unknown", "skipped", "run-secs")
	total := soakRow{}
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "  %-20s %6d %6d %8d %8d %9.1f\n", r.Scenario, r.Pass, r.Fail, r.Unknown, r.Skipped, r.Seconds)
		total.Pass += r.Pass
		total.Fail += r.Fail
		total.Unknown += r.Unknown
		total.Skipped += r.Skipped
	}
	fmt.Fprintf(w, "  %-20s %6d %6d %8d %8d %9.1f (wall)\n", "all", total.Pass, total.Fail, total.Unknown, total.Skipped, rep.Seconds)
	sort.Strings(rep.Bad)
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "\nnot run: %s", e)
	}
	for _, d := range rep.Bad {
		fmt.Fprintf(w, "\nnot passed: %s (idemcheck recheck %s)", d, d)
	}
	for _, c := range rep.BadDraws {
		fmt.Fprintf(w, "\nnot passed: %s", c)
	}
	if len(rep.Draws) > 0 {
		fmt.Fprintf(w, "\n%d drawn runs (--random-flags)", len(rep.Draws))
	}
	switch {
	case len(rep.Journals) > 1:
		fmt.Fprintf(w, "\njournals: %s", strings.Join(rep.Journals, ", "))
	case rep.Journal != "":
		fmt.Fprintf(w, "\njournal: %s", rep.Journal)
	}
	if rep.Interrupted {
		fmt.Fprintf(w, "\ninterrupted: %d of %d seeds ran", rep.Ran, rep.Seeds)
	}
	const shown = 8
	never := 0
	unit := "seed"
	if len(rep.Draws) > 0 {
		unit = "draw" // numbered in the plan; each ran on a seed drawn for it
	}
	for _, u := range rep.Unfinished {
		switch {
		case u.Started:
			fmt.Fprintf(w, "\ncut short: %s %d", unit, u.Seed)
		case never < shown:
			fmt.Fprintf(w, "\nnever ran: %s %d", unit, u.Seed)
			never++
		default:
			never++
		}
	}
	if never > shown {
		fmt.Fprintf(w, "\nnever ran: and %d more %s(s)", never-shown, unit)
	}
	fmt.Fprintln(w)
	verdict := "PASS"
	switch {
	case total.Fail > 0:
		verdict = "FAIL"
	case len(rep.Errors) > 0:
		verdict = "SETUP ERROR"
	case total.Unknown > 0 || len(rep.Unfinished) > 0 || rep.Interrupted:
		verdict = "UNKNOWN" // soakCode's exit 3: a soak cut short is no pass
	case nothingJudged(rep):
		verdict = "SKIPPED"
		fmt.Fprintf(w, "\nnothing was judged: every scenario run was skipped on the store (exit 3), so this soak is not a pass\n")
	}
	fmt.Fprintf(w, "\n%s: %d scenario runs passed, %d failed, %d undecided, %d skipped, %.0fs\n", verdict, total.Pass, total.Fail, total.Unknown, total.Skipped, rep.Seconds)
}

// maxDrawCalls bounds the calls a drawn run may record: about 1 GB
// (harness.BytesPerCall), with room for the soak's CPU hogs beside it.
const maxDrawCalls = 200_000

// drawRun is the drawn run number n of a random-flag soak: its options
// and command line, drawn from a PRNG of the draw seed and n alone, so
// one draw can be made again alone (with --seeds n-n). A draw that no
// scenario fits is drawn again from the same PRNG.
func drawRun(drawSeed, n int64, base harness.Options, b drawBudget) (harness.Options, string) {
	r := rand.New(rand.NewSource(drawSeed*1_000_003 + n))
	for {
		if o, cmd := drawOptions(r, base, b); o != nil {
			return *o, cmd
		}
	}
}

// cmdSpin spins on one CPU until killed: the soak's CPU hog (internal).
func cmdSpin() int {
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			return 0
		}
	}
}

// slowReason says why a soak's run may outlast its forecast (drawProgress),
// for a store in another language (exec) or a registered one.
func slowReason(exec bool) string {
	return slowCause(exec) + " (the forecast, and --budget with --random-flags, bound nothing; an interrupt ends the soak and reports every seed that ended)"
}

// slowCause says why a run may outlast its forecast: a store in another
// language (exec) is priced at a guess.
func slowCause(exec bool) string {
	if exec {
		return fmt.Sprintf("the forecast prices a call of a store in another language at %s, and this store's calls take longer", stores.DefaultCallWall)
	}
	return "a loaded machine, or a store slower than the backend's forecast"
}
