package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/report/htmlreport"
	"github.com/idemcheck/idemcheck/harness/results"

	"github.com/idemcheck/idemcheck/internal/buildinfo"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/lease"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	_ "github.com/idemcheck/idemcheck/stores/redis"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

const checkHelp = `Usage: idemcheck check [flags]

Runs scenarios against one store variant under concurrent clients and
injected faults, records every call, and checks the history with every
checker (idemcheck list shows them). Each run writes
<out>/<time>-<store>-<variant>/ (summary.json, history.jsonl, report.md, the
porcupine visualisation, and traces of violated keys) and points <out>/latest
at it.

Postgres and Redis come from IDEM_POSTGRES_DSN / IDEM_REDIS_ADDR when set,
else from containers started with testcontainers (removed on exit).

Exit codes: 0 pass, 1 violation found, 2 bad usage or setup error, 3 undecided.
` + execHelp

func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	def := harness.DefaultOptions()
	fs := newFlagSet("check", checkHelp)
	store := fs.String("store", "sqlite", "store backend: "+strings.Join(stores.Backends(), ", ")+", or exec (with --cmd)")
	variant := fs.String("variant", stores.Correct, "store variant: correct or a mutant (idemcheck list)")
	scenario := fs.String("scenario", "all", "scenario to run, or all")
	clients := fs.Int("clients", def.Clients, "concurrent clients per scenario")
	keys := fs.Int("keys", def.Keys, "keys (orders) per scenario")
	seed := fs.Int64("seed", def.Seed, "seed for the workload's random choices")
	duration := fs.Duration("duration", 0, "repeat each scenario's rounds until this long has passed (0: one round)")
	lockTTL := fs.Duration("lock-ttl", def.LockTTL, "the stores' LockTTL")
	retention := fs.Duration("retention", def.Retention, "how long the stores keep a key (the retention and store-faults scenarios and a replicated topology keep their own)")
	count := fs.Int("count", 1, "run the scenarios this many times, each run on its own store")
	parallel := fs.Int("parallel", def.Parallel, "scenarios run at once, each on its own store (1: one after another); the scheduled ones run apart, up to eight episode slots at once on a server, and those that pause the server run alone")
	strict := fs.Bool("strict-retention", false, "a key kept past its retention fails the run (by default it is a finding)")
	maxMem := bytesFlag(def.MaxMemory)
	fs.Var(&maxMem, "max-memory", "the memory the harness may use (e.g. 4GB; 0: no limit; default: half the memory available at start): once it holds half, the run stops and reports what it recorded, checked with the other half")
	strictAvail := fs.Bool("strict-availability", false, "a store that answers contention with errors (past the tolerance) fails the run (by default it is a finding)")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	out := fs.String("out", "results", "directory for run results")
	keep := fs.Int("keep", 20, "keep only the newest N passing run directories in --out (failing, undecided and interrupted ones are never removed) (0: keep all)")
	junit := fs.String("junit", "", "also write a JUnit XML report (one testcase per scenario × checker) to this file")
	sf := addStoreFlags(fs)
	if err := parse(fs, checkHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	backend, ex, err := sf.lookup(ctx, fs, store, variant)
	if err != nil {
		return exitUsage, err
	}
	o := def
	o.Backend, o.Variant, o.Clients, o.Keys, o.Seed, o.Duration, o.LockTTL = backend, *variant, *clients, *keys, *seed, *duration, *lockTTL
	o.Count, o.StrictRetention, o.Parallel, o.Retention = *count, *strict, *parallel, *retention
	o.StrictAvailability, o.MaxMemory = *strictAvail, uint64(maxMem)
	if o.MaxMemory > 0 {
		// The collector then works to keep the process under the limit
		// before the run is stopped at half of it for what it holds; the
		// limit before is back once the command returns (tests run it in
		// their own process).
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(min(o.MaxMemory, math.MaxInt64))))
	}
	if *scenario != "all" {
		o.Scenarios = strings.Split(*scenario, ",")
	}
	if err := o.Validate(); err != nil {
		return exitUsage, usageError{err.Error()}
	}
	if *keep < 0 {
		return exitUsage, usagef("--keep must not be negative, got %d", *keep)
	}
	if *count < 1 {
		return exitUsage, usagef("--count must be at least 1, got %d", *count)
	}
	if *parallel < 1 {
		return exitUsage, usagef("--parallel must be at least 1, got %d", *parallel)
	}
	if err := writable(*junit); err != nil {
		return exitUsage, usagef("--junit %s: %v", *junit, err)
	}
	started := time.Now()
	dir, err := report.PrepareRunDir(*out, backend.Name, o.Variant, started)
	if err != nil {
		return exitUsage, err
	}
	o.SpillDir = filepath.Join(dir.Path, harness.SpillDir)
	defer os.RemoveAll(o.SpillDir)
	withdraw := jsonAtOnce(*asJSON, stdout, "check", dir.Path)
	defer withdraw()
	if !*asJSON {
		warnCost(stderr, o)
		sayCrashed(stderr, *out)
	}
	journal, err := openRunJournal(dir)
	if err != nil {
		os.RemoveAll(dir.Path)
		return exitUsage, err
	}
	o.Journal = journal
	defer journal.Close()
	var sum *results.Summary
	var protoErr error // the store broke the protocol: the run stopped there
	cleanup, err := provision(ctx, &o, stderr, o.OwnServersAhead())
	switch {
	case err != nil && ctx.Err() != nil:
		// Interrupted while its servers started: nothing ran, and the
		// run says so, with its results directory, like any other.
		sum = o.Unstarted(started)
	case err != nil:
		os.RemoveAll(dir.Path)
		return exitUsage, err
	default:
		// The servers are not needed once the run has ended: they are
		// removed while its files are written, and waited for before
		// this returns.
		var once sync.Once
		removeServers := func() { once.Do(cleanup) }
		defer removeServers()
		ov := &overrun{w: stderr, terminal: isTerminal(stderr), forecast: o.Estimate(), why: slowCause(ex != nil) + " (an interrupt ends the run and reports what it recorded)"}
		switch {
		case *asJSON:
		case ov.terminal:
			ov.next, o.ProgressEvery = func(p harness.Progress) { printProgress(stderr, p) }, 200*time.Millisecond
		case o.Estimate() > time.Minute:
			// A long run in a log (CI, a pipe): a line per scenario as
			// it ends, and one every logProgressEvery while it runs.
			ov.next, o.ProgressEvery = func(p harness.Progress) { logProgress(stderr, p) }, logProgressEvery
		default:
			// A short run in a log: nothing, unless it runs far past
			// its forecast (overrun).
			o.ProgressEvery = logProgressEvery
		}
		if !*asJSON {
			o.Progress = ov.report
		}
		rctx, workers, protocolErr := execRun(ctx, ex, o.WorkerCommand)
		o.WorkerCommand = workers
		sum, err = harness.Run(rctx, o)
		removed := make(chan struct{})
		go func() { defer close(removed); removeServers() }()
		defer func() { <-removed }()
		if o.Progress != nil && isTerminal(stderr) {
			fmt.Fprint(stderr, "\r\033[K") // the live line goes; the summary stays
		}
		if perr := protocolErr(); perr != nil {
			if err != nil || sum == nil {
				os.RemoveAll(dir.Path)
				return exitUsage, perr
			}
			// The store broke the protocol: the run stopped there, as an
			// interrupt stops it. What it recorded is written and
			// reported, and what finished proves stands: a violation
			// found before is exit 1, not hidden by exit 2.
			protoErr = perr
			sum.Interrupted, sum.Stopped = true, "stopped: the store broke the protocol ("+perr.Error()+")"
			if sum.Verdict != check.Fail {
				sum.Verdict = check.Unknown
			}
		}
		if err != nil {
			os.RemoveAll(dir.Path)
			return exitUsage, err
		}
	}
	stamp(sum, append([]string{"idemcheck", "check"}, args...))
	code := verdictCode(sum)
	// A report that cannot be written is said, and the verdict stands: CI
	// must never read a found bug as a broken setup.
	errs := writeRun(dir, sum, *junit)
	for _, err := range errs {
		fmt.Fprintf(stderr, "idemcheck: %v (the verdict stands)\n", err)
	}
	endUnwritten(stderr, dir, sum, errs)
	closeRunJournal(stderr, dir, journal, len(errs) == 0)
	if *keep > 0 {
		if removed, err := report.Prune(*out, *keep); err != nil {
			fmt.Fprintf(stderr, "idemcheck: pruning old results in %s: %v\n", *out, err)
		} else if removed > 0 && !*asJSON {
			fmt.Fprintf(stderr, "idemcheck: removed %d old passing run(s) from %s (--keep %d)\n", removed, *out, *keep)
		}
	}
	if *asJSON {
		withdraw() // its own object from here on
		if err := printJSON(stdout, sum); err != nil {
			return exitUsage, err
		}
	} else {
		printSummary(stdout, sum, len(errs))
		printReproduce(stdout, sum, o)
	}
	if protoErr != nil && code != exitFail {
		return exitUsage, protoErr
	}
	return code, nil
}

// warnCost says, before a run starts, when it will take more than a
// minute, hold more than 2 GB, or write more than its results directory's
// disk has free (harness.Options.Estimate and EstimateCalls): a run that
// will exhaust the machine should not come as a surprise.
func warnCost(w io.Writer, o harness.Options) {
	if est := o.Estimate(); est > time.Minute {
		// A bound more than a forecast: a scenario waits out a LockTTL
		// only where a claim is left in flight, which the run decides.
		fmt.Fprintf(w, "idemcheck: this run may take up to about %v (%d scenario runs, LockTTL %v: a scenario waits out a LockTTL only where a claim is left in flight)\n",
			est.Round(time.Second), len(o.Plan()), o.LockTTL)
	}
	calls := o.EstimateCalls()
	if o.SpillDir != "" {
		dir := filepath.Dir(o.SpillDir)
		need := uint64(calls) * (harness.DiskBytesPerCall + harness.HistoryBytesPerCall)
		if free, err := freeBytes(dir); err == nil && need > free {
			fmt.Fprintf(w, "idemcheck: this run may write about %s into %s (its journal, its history), and that disk has %s free: "+
				"some of its files may not be written (the verdict stands); fewer --keys, --clients or --count write less, or --out another disk\n",
				roughBytes(need), dir, roughBytes(free))
		}
	}
	if spill := int64(cmp.Or(o.SpillAfter, harness.DefaultSpillAfter)); o.SpillDir != "" && calls > spill {
		fmt.Fprintf(w, "idemcheck: this run may record about %d store calls: past %d, a scenario's history goes to disk as it grows (about %.1f GB in %s while it runs) and is checked part by part\n",
			calls, spill, float64(calls*harness.DiskBytesPerCall)/(1<<30), o.SpillDir)
		return
	}
	if calls*harness.BytesPerCall > 2<<30 {
		fmt.Fprintf(w, "idemcheck: this run may record about %d store calls and hold about %.1f GB in memory until it ends; fewer --keys, --clients or --count hold less\n",
			calls, float64(calls*harness.BytesPerCall)/(1<<30))
		if o.MaxMemory > 0 && uint64(calls*harness.BytesPerCall) > o.MaxMemory {
			fmt.Fprintf(w, "idemcheck: once it holds half of --max-memory %s the run stops and reports what it recorded, undecided\n", (*bytesFlag)(&o.MaxMemory))
		}
	}
}

// roughBytes prints a size to a tenth of a GB, or in whole MB below one.
func roughBytes(n uint64) string {
	switch {
	case n < 1<<20: // "0 MB" of 16 KB free read as no warning at all
		return fmt.Sprintf("%d KB", (n+1023)>>10) // rounded up: 1 byte is no "0 KB"
	case n < 1<<30:
		return fmt.Sprintf("%d MB", n>>20)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
}

// freeBytes is the disk space an unprivileged writer has free where dir
// lies.
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// writeRun writes a run's files: its results directory, its HTML report
// and, if junit names a file, the JUnit report. It returns every error,
// so that one file that cannot be written keeps none of the others back.
func writeRun(dir *report.RunDir, sum *results.Summary, junit string) []error {
	var errs []error
	if err := dir.Write(sum); err != nil {
		errs = append(errs, fmt.Errorf("writing results to %s: %v", dir.Path, err))
	}
	if err := htmlreport.Write(dir.Path, sum); err != nil {
		errs = append(errs, fmt.Errorf("writing the HTML report to %s: %v", dir.Path, err))
	}
	if junit != "" {
		if err := report.WriteJUnit(junit, sum); err != nil {
			errs = append(errs, fmt.Errorf("writing the JUnit report: %v", err))
		}
	}
	return errs
}

// writable reports why a file cannot be written at path ("" is nothing
// to write): checked before a run, so that a report path that is wrong
// fails at once (exit 2), not after the run (whose verdict must stand).
func writable(path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("is a directory")
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".idemcheck-probe-*")
	if err != nil {
		return fmt.Errorf("cannot write there: %v", unwrapPath(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// unwrapPath drops the operation and path a PathError repeats.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// verdictCode is the exit code of a run's verdict: 0 pass, 1 fail, 3 an
// interrupted or undecided run, or one that judged nothing (every
// scenario skipped); a violation found before an interrupt still exits
// 1: it is true.
func verdictCode(sum *results.Summary) int {
	switch {
	case sum.Verdict == check.Fail:
		return exitFail
	case sum.Verdict == check.Pass && !sum.Interrupted:
		return exitPass
	}
	return exitUnknown
}

// stamp records where the run came from: the command line, this build,
// the Go version.
func stamp(sum *results.Summary, argv []string) {
	b := buildinfo.Get()
	sum.Argv, sum.Version, sum.GoVersion, sum.Commit = argv, b.Version, b.GoVersion, b.Revision()
}

// printInterrupted says, of a run cut short, which scenario runs
// finished, which were cut and which never ran, and why it stopped.
func printInterrupted(w io.Writer, sum *results.Summary) {
	if !sum.Interrupted {
		return
	}
	var done, cut, unset []string
	for _, s := range sum.Scenarios {
		// Cut short: every run the interrupt left undecided, whether
		// its workload or its checking was stopped.
		switch {
		case s.Verdict == check.Skipped: // never ran: neither finished nor cut
		case s.Verdict == check.Unknown && strings.HasPrefix(s.Error, harness.SetupFailed):
			unset = append(unset, s.ID().String()) // never started its workload
		case s.Verdict == check.Unknown:
			cut = append(cut, s.ID().String())
		case s.Cut != nil: // its journal stopped before its end: judged on what it recorded
			cut = append(cut, fmt.Sprintf("%s (judged on what its journal recorded: %s)", s.ID(), s.Verdict))
		default:
			done = append(done, s.ID().String())
		}
	}
	fmt.Fprintf(w, "\nINTERRUPTED: %d scenario run(s) finished (%s); cut short: %s; %d never ran (%s)",
		len(done), listOrNone(done), listOrNone(cut), len(sum.NotRun), listOrNone(sum.NotRun))
	if len(unset) > 0 {
		fmt.Fprintf(w, "; could not be set up: %s", strings.Join(unset, ", "))
	}
	fmt.Fprintln(w)
	if sum.Stopped != "" {
		fmt.Fprintf(w, "%s\n", sum.Stopped)
	}
}

// printReproduce prints, after a failing or interrupted run, the lines
// that reproduce it: the check command for each failing scenario with
// its seed and the run's shape, and the recheck command on the saved
// history.
func printReproduce(w io.Writer, sum *results.Summary, o harness.Options) {
	printInterrupted(w, sum)
	var failed []string
	for _, s := range sum.Scenarios {
		if s.Verdict == check.Fail && !slices.Contains(failed, s.Name) {
			failed = append(failed, s.Name)
		}
	}
	if len(failed) == 0 {
		return
	}
	def := harness.DefaultOptions()
	cmd := fmt.Sprintf("idemcheck check --store %s --variant %s --scenario %s --seed %d", storeArgs(o.Backend.Name, sum.Argv), o.Variant, strings.Join(failed, ","), o.Seed)
	if o.Clients != def.Clients {
		cmd += fmt.Sprintf(" --clients %d", o.Clients)
	}
	if o.Keys != def.Keys {
		cmd += fmt.Sprintf(" --keys %d", o.Keys)
	}
	if o.LockTTL != def.LockTTL {
		cmd += fmt.Sprintf(" --lock-ttl %v", o.LockTTL)
	}
	if o.Retention != def.Retention {
		cmd += fmt.Sprintf(" --retention %v", o.Retention)
	}
	if o.Duration > 0 {
		cmd += fmt.Sprintf(" --duration %v", o.Duration)
	}
	if o.StrictRetention {
		cmd += " --strict-retention"
	}
	if o.StrictAvailability {
		cmd += " --strict-availability"
	}
	fmt.Fprintf(w, "\nreproduce: %s\n", cmd)
	fmt.Fprintf(w, "recheck:   idemcheck recheck %s\n", sum.Dir)
	for _, s := range sum.Scenarios {
		if s.Verdict == check.Fail && len(s.Episodes) > 0 {
			fmt.Fprintf(w, "replay:    idemcheck replay %s\n", sum.Dir)
			break
		}
	}
}

// openRunJournal starts the run's journal in its results directory
// (harness.JournalFile): what a run records goes to disk as it is
// recorded, so a run whose process dies still reports (recheck).
func openRunJournal(dir *report.RunDir) (*history.Journal, error) {
	j, err := harness.CreateJournal(dir.Path)
	if err != nil {
		return nil, fmt.Errorf("cannot write results to %s: %v", dir.Path, unwrapPath(err))
	}
	return j, nil
}

// endUnwritten leaves the last word (report.WriteEnded) of a run whose
// summary could not be written, a full disk above all: its verdict and
// why its files are missing. Its journal, stopped where the disk filled,
// would otherwise read as that of a run whose process died, to recheck
// and to the next run. A run whose summary is written needs none.
func endUnwritten(stderr io.Writer, dir *report.RunDir, sum *results.Summary, errs []error) {
	if len(errs) == 0 {
		return
	}
	if _, err := os.Stat(filepath.Join(dir.Path, "summary.json")); err == nil {
		return
	}
	var why []string
	for _, err := range errs {
		why = append(why, err.Error())
	}
	leaveLastWord(stderr, dir.Path, string(sum.Verdict), sum.Interrupted, why)
}

// closeRunJournal ends the run's journal: removed once the run's files are
// written (written, they are the record), kept otherwise. A journal that
// stopped writing is said: the verdict stands, but a crash would have
// lost the run.
func closeRunJournal(stderr io.Writer, dir *report.RunDir, j *history.Journal, written bool) {
	if err := harness.EndJournal(j, dir.Path, written); err != nil {
		fmt.Fprintf(stderr, "idemcheck: the run's journal stopped: %v (the verdict stands; had the run crashed, it would have been lost)\n", err)
	}
}
