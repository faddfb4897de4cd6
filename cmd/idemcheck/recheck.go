package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpreport"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/internal/buildinfo"
	"github.com/idemcheck/idemcheck/internal/wholefile"
)

const recheckHelp = `Usage: idemcheck recheck [--json] [--inflight-ttl D] [--saves-errors] [--replay-any-2xx] [--key required|optional] <run-dir>

Re-checks a saved run: reads <run-dir>/summary.json and history.jsonl (as
idemcheck check, or idemcheck http, wrote them) and judges every scenario's history again with
this build's checkers, by the parameters it was judged with (LockTTL,
retention, the probe client). Nothing runs against a store. Use it to see
whether a saved failure still fails after a change to the checkers, and to
keep failing runs as regression tests (harness/testdata/runs).

A run whose process died (killed, out of memory, the machine stopped)
left no summary.json but its journal, journal.jsonl: recheck then
recovers it. A mutants run's or a soak's directory recovered so reports
the hunts (seeds) that finished and names those that did not, cut short
or never run: exit 1 when what finished proves a failure (a mutant
survived, the correct store failed, a seed's run failed), else 3 when
anything did not finish; a finished one's saved verdict is printed. Each scenario that finished keeps its result; the one cut
short is judged on what it recorded, its calls in flight of unknown
outcome, and is at best undecided; the run's files are written into
<run-dir>. A black-box run (idemcheck http) recovered so is judged as an
interrupted one: its requests in flight unanswered, a violation in what
it recorded standing, liveness not judged.

A finished black-box run may be judged by other declarations than it
made, as an undecided one's report asks (--inflight-ttl, --saves-errors, --replay-any-2xx,
--key): the service's answers are the same, so there is no need to run
it again. The final probes ran as long as the run's declarations had
them run: a key held longer than they lasted is still not judged.

Prints the summary as check does, with each scenario's verdict then and
now. Exit codes: 0 pass, 1 a violation, 2 bad usage or an unreadable run,
3 undecided.
`

func cmdRecheck(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("recheck", recheckHelp)
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	ttl := fs.Duration("inflight-ttl", 0, "a black-box run: judge it with this in-flight TTL declared instead of the run's")
	savesErrors := fs.Bool("saves-errors", false, "a black-box run: judge it as of a service that saves its 5xx answers")
	replayAny := fs.Bool("replay-any-2xx", false, "a black-box run: judge it as of a service that replays a success's body under perhaps another 2xx")
	keyPolicy := fs.String("key", "", "a black-box run: judge it with the key declared required or optional")
	pos, err := parseArgs(fs, recheckHelp, args, stdout, 1)
	if err != nil {
		return exitUsage, err
	}
	dir := ""
	if len(pos) > 0 {
		dir = pos[0]
	}
	var redeclared []string // the declarations given here, in flag form
	for _, name := range []string{"inflight-ttl", "saves-errors", "replay-any-2xx", "key"} {
		if given(fs, name) {
			redeclared = append(redeclared, "--"+name+"="+fs.Lookup(name).Value.String())
		}
	}
	if *keyPolicy != "" && *keyPolicy != "required" && *keyPolicy != "optional" {
		return exitUsage, usagef("recheck: --key must be required or optional, got %q", *keyPolicy)
	}
	if *ttl < 0 {
		return exitUsage, usagef("recheck: --inflight-ttl must not be negative, got %v", *ttl)
	}
	if dir == "" {
		return exitUsage, usagef("recheck: name a run directory (results/latest, or one under results/)")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return exitUsage, usagef("recheck: %s is not a run directory", dir)
	}
	// A run stopped at once (a second interrupt, a SIGKILL) while it
	// wrote a file left that file's new copy beside it: its report, as
	// 1.7 MB of dot-file no later recheck removed.
	wholefile.Sweep(dir)
	if hs := httpSummary(dir); hs != nil { // an idemcheck http run
		p := &hs.Run.Policy
		if given(fs, "inflight-ttl") {
			p.InFlightTTL = *ttl
		}
		if given(fs, "saves-errors") {
			p.SavesErrors = *savesErrors
		}
		if given(fs, "replay-any-2xx") {
			p.ReplayAny2xx = *replayAny
		}
		if given(fs, "key") {
			p.KeyOptional = *keyPolicy == "optional"
		}
		return recheckHTTP(dir, hs, redeclared, *asJSON, stdout)
	}
	if len(redeclared) > 0 {
		return exitUsage, usagef("recheck: %s: only a finished black-box run (idemcheck http) can be judged by other declarations; %s is not one", strings.Join(redeclared, " "), dir)
	}
	kind := journalKind(filepath.Join(dir, harness.JournalFile))
	if nothingRecorded(dir) {
		return recoverNothing(dir, *asJSON, stdout)
	}
	if crashed(dir) {
		if held, err := history.JournalHeld(filepath.Join(dir, harness.JournalFile)); err == nil && held {
			return exitUsage, fmt.Errorf("recheck: the run in %s is still running (its process holds its journal): recheck it once it ends", dir)
		}
		switch kind {
		case httpreport.JournalNote:
			return recoverHTTP(dir, *asJSON, stdout, stderr)
		case mutantsKind:
			return recoverMutants(dir, *asJSON, stdout, stderr)
		case mutateKind:
			return recoverMutate(dir, *asJSON, stdout, stderr)
		case soakKind:
			return recoverSoak(dir, *asJSON, stdout, stderr)
		case tornKind:
			return recoverTorn(dir, *asJSON, stdout)
		case damagedKind:
			return exitUsage, damagedJournal(filepath.Join(dir, harness.JournalFile))
		}
		return recoverRun(ctx, dir, *asJSON, stdout, stderr)
	}
	switch kind { // a mutants run or a soak that ended: its journal stays beside its summary
	case mutantsKind:
		return recheckMutantsSummary(dir, *asJSON, stdout)
	case mutateKind:
		return recheckMutateSummary(dir, *asJSON, stdout)
	case soakKind:
		return recheckSoakSummary(dir, *asJSON, stdout)
	}
	saved, done, err := harness.LoadRunSpilled(ctx, dir)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(stdout, "UNDECIDED: interrupted while %s was loaded: nothing was judged (the run's files are as they were)\n", dir)
		return exitUnknown, nil
	}
	if err != nil {
		return exitUsage, fmt.Errorf("recheck: %v", err)
	}
	defer done()
	sum := harness.Recheck(ctx, saved)
	sum.Dir, _ = filepath.Abs(dir)
	if *asJSON {
		return verdictCode(sum), printJSON(stdout, sum)
	}
	fmt.Fprintf(stdout, "recheck of %s (made by %s, commit %s), with %s\n\n", dir, orUnknown(saved.Version), orUnknown(saved.Commit), buildinfo.Get())
	for i, s := range sum.Scenarios {
		then := saved.Scenarios[i].Verdict
		mark := ""
		if then != s.Verdict {
			mark = "   (changed)"
		}
		fmt.Fprintf(stdout, "  %-20s then %-8s now %-8s%s\n", s.ID(), then, s.Verdict, mark)
	}
	printSummary(stdout, sum, 0) // a recheck writes nothing
	printInterrupted(stdout, sum)
	return verdictCode(sum), nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// crashed reports whether dir is a run whose process died: its journal
// is there, its summary never written.
func crashed(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, harness.JournalFile))
	return err == nil
}

// nothingRecorded reports whether dir is a run's directory (its
// report.Marker) that holds neither a summary nor a journal: its run
// stopped, interrupted or killed, while it started, before it recorded
// anything (idemcheck http while its service started).
func nothingRecorded(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, report.Marker)); err != nil {
		return false
	}
	for _, f := range []string{"summary.json", harness.JournalFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return false
		}
	}
	return true
}

// recoverNothing reports a run that recorded nothing (nothingRecorded):
// nothing ran, nothing was judged (exit 3).
//
// A directory holding a finished run's other files (its history, its
// report) lost only its summary.json (deleted, or a copy that left it
// out): that is said, a setup error (exit 2), where it read as a run
// that recorded nothing.
func recoverNothing(dir string, asJSON bool, stdout io.Writer) (int, error) {
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		// Any file of the run's but its marker and its last word (which
		// a run reserves as it starts): a run that got as far as
		// writing its traces and pages on a full disk, and could write
		// neither its journal nor its summary, read as one that
		// recorded nothing beside a failed seed's trace.
		// Nor a black-box run's instance logs, written from its start (a
		// service that never started left two, and read as a finished
		// run that lost its summary).
		if n := e.Name(); n != report.Marker && n != report.EndFile && !strings.HasPrefix(n, ".") && !strings.HasSuffix(n, ".log") {
			left = append(left, n)
		}
	}
	if len(left) > 0 {
		return exitUsage, fmt.Errorf("recheck: %s has no summary.json but holds %s: a run that got as far as writing its files and lost its summary (deleted, left out of a copy, or never written on a full disk), which is what recheck reads; restore it from the run's copy, or read the verdict of the run that started it (a soak's summary names each of its runs')", dir, strings.Join(left, ", "))
	}
	const why = "it recorded nothing here: nothing ran that left a record (it stopped while it started, interrupted or killed), or none of its files could be written (a full disk), so nothing here is judged (a soak that named this directory keeps the run's verdict in its own summary)"
	if asJSON {
		return exitUnknown, printJSON(stdout, map[string]any{"dir": dir, "verdict": "unknown", "why": why})
	}
	fmt.Fprintf(stdout, "the run in %s ended before it finished: %s\nexit 3: undecided\n", dir, why)
	return exitUnknown, nil
}

// recoverRun reports a run whose process died, from its journal
// (harness.Recover), and writes its files into dir.
func recoverRun(ctx context.Context, dir string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	sum, err := harness.Recover(ctx, filepath.Join(dir, harness.JournalFile))
	defer os.RemoveAll(filepath.Join(dir, harness.SpillDir)) // once the files below are written
	if err != nil {
		return exitUsage, fmt.Errorf("recheck: %v", err)
	}
	why := harness.Crashed
	if e, ok := report.ReadEnded(dir); ok {
		why = endedLine(e) + "; this report was recovered from its journal, " + harness.JournalFile
		harness.Unwritten(sum, why, e.Interrupted)
	}
	abs, _ := filepath.Abs(dir)
	rd := &report.RunDir{Root: filepath.Dir(abs), Path: abs, Older: true}
	errs := writeRun(rd, sum, "")
	for _, err := range errs {
		fmt.Fprintf(stderr, "idemcheck: %v (the verdict stands)\n", err)
	}
	if asJSON {
		return verdictCode(sum), printJSON(stdout, sum)
	}
	fmt.Fprintf(stdout, "recovered %s from its journal: %s\n\n", dir, why)
	printSummary(stdout, sum, len(errs))
	printInterrupted(stdout, sum) // what finished, what was cut, what never ran
	return verdictCode(sum), nil
}

// endedLine says what a run that finished without its files said last
// (report.Ended): when, its verdict, and why its files are missing.
func endedLine(e report.Ended) string {
	v := strings.ToUpper(e.Verdict)
	if e.Interrupted {
		v += ", interrupted"
	}
	return fmt.Sprintf("the run finished at %s (%s) but could not write its files: %s",
		e.At.Local().Format("2006-01-02 15:04:05"), v, strings.Join(e.Unwritten, "; "))
}
