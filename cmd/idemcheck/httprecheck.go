package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpcheck"
	"github.com/idemcheck/idemcheck/harness/httpreport"
	"github.com/idemcheck/idemcheck/harness/report"
)

// httpSummary reads dir/summary.json as an `idemcheck http` run's, or
// returns nil when it is not one (a store run's summary has no targets).
func httpSummary(dir string) *httpreport.Summary {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return nil
	}
	var s httpreport.Summary
	if json.Unmarshal(b, &s) != nil || len(s.Run.Targets) == 0 {
		return nil
	}
	return &s
}

// judgeHTTP judges a black-box run's history by the policy the run
// declared, an interrupted one (run.Interrupted) as httpcheck.Interrupted
// has it, one that never reached the service's payment endpoint as
// httpcheck.Unreached has it, and gives the exit code of the verdict: 1
// for a violation, 3 when no violation but something was not judged,
// else 0. The one way
// from a black-box history to its verdict: the run, its recheck and its
// recovery from a journal.
func judgeHTTP(run httpreport.Run, h *history.History, l *history.Ledger) ([]httpcheck.Result, int) {
	ev := httpcheck.Evidence{Hist: h, Ledger: l, Policy: run.Policy}
	results := httpcheck.Run(ev)
	if run.Interrupted != "" {
		results = httpcheck.Interrupted(results, run.Interrupted)
	}
	results = httpcheck.Unreached(results, ev, run.Interrupted != "")
	if run.Interrupted == "" { // an interrupted run's liveness is not judged at all
		results = httpcheck.Down(results, run.Down, notRestarted(run.Crashes))
	}
	switch {
	case !httpreport.Pass(results):
		return results, exitFail
	case httpreport.Undecided(results):
		return results, exitUnknown
	}
	return results, exitPass
}

// recheckHTTP judges a saved black-box run again with this build's
// checkers, by the policy in sum (the run's, or as redeclared: the
// flags that changed it, said first): it prints each checker's verdict
// then and now, and writes nothing.
func recheckHTTP(dir string, sum *httpreport.Summary, redeclared []string, asJSON bool, stdout io.Writer) (int, error) {
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return exitUsage, fmt.Errorf("recheck: %v", err)
	}
	defer f.Close()
	saved, err := history.Load(f)
	if err != nil || len(saved) != 1 {
		return exitUsage, fmt.Errorf("recheck: %s/history.jsonl: want one black-box history (%v)", dir, err)
	}
	// A history.jsonl cut at a line's end loads as a shorter run: judged,
	// it passed on half the evidence, or failed a service whose charges
	// were cut off ("the provider saw no charge").
	if n, c := len(saved[0].Hist.Exchanges()), len(saved[0].Ledger.Charges()); n < sum.Requests || c < sum.Charges {
		return exitUsage, fmt.Errorf("recheck: %s/history.jsonl holds %d requests and %d charges, and the run recorded %d and %d: the file is not the whole run's (cut short); recheck judges only a whole history",
			dir, n, c, sum.Requests, sum.Charges)
	}
	results, code := judgeHTTP(sum.Run, saved[0].Hist, saved[0].Ledger)
	if asJSON {
		return code, printJSON(stdout, map[string]any{"dir": dir, "pass": code == exitPass, "results": results})
	}
	then := map[string]httpcheck.Result{}
	for _, r := range sum.Results {
		then[r.Checker] = r
	}
	fmt.Fprintf(stdout, "recheck of the black-box run %s, with this build's checkers\n", dir)
	if len(redeclared) > 0 {
		fmt.Fprintf(stdout, "judged by the declarations %s, not the run's (the final probes ran as the run's had them)\n", strings.Join(redeclared, " "))
	}
	fmt.Fprintln(stdout)
	for _, r := range results {
		was, now := "-", httpreport.Word(r)
		if t, ok := then[r.Checker]; ok {
			was = httpreport.Word(t)
		}
		mark := ""
		if was != now {
			mark = "   (changed)"
		}
		fmt.Fprintf(stdout, "  %-16s then %-5s now %-5s%s\n", r.Checker, was, now, mark)
	}
	fmt.Fprintln(stdout)
	run := sum.Run
	run.Declared = redeclaredLines(run.Declared, redeclared)
	if err := httpreport.Write(stdout, run, saved[0].Hist, saved[0].Ledger, results); err != nil {
		return exitUsage, err
	}
	// The run's last line, as the run itself ends: a recheck ended on
	// the checkers' lines with no verdict of its own.
	fmt.Fprintln(stdout, httpreport.Closing(results))
	return code, nil
}

// redeclaredLines marks the run's declaration lines that a recheck's
// flags replaced (redeclared, in flag form) as the run's, naming the
// flag the recheck judges by: the report said "in-flight TTL: not
// declared" under a header judging by --inflight-ttl=30s.
func redeclaredLines(lines, redeclared []string) []string {
	prefixes := map[string][]string{"--inflight-ttl": {"in-flight TTL:"}, "--saves-errors": {"saves errors:"}, "--replay-any-2xx": {"replays:"}, "--key": {"key required:", "key optional:"}}
	out := slices.Clone(lines)
	for _, flag := range redeclared {
		name, _, _ := strings.Cut(flag, "=")
		marked := false
		for i, l := range out {
			for _, p := range prefixes[name] {
				if strings.HasPrefix(l, p) {
					out[i] = fmt.Sprintf("%s (as the run declared it; judged here by %s)", l, flag)
					marked = true
				}
			}
		}
		if !marked {
			out = append(out, flag+": declared by this recheck, not by the run")
		}
	}
	return out
}

// crashedHTTP is what a black-box run recovered from its journal says of
// when it was cut short (httpreport.Run.Interrupted).
const crashedHTTP = "when its process died (killed, stopped at once by a second interrupt, out of memory, or the machine stopped): this report was recovered from its journal, " + harness.JournalFile

// recoverHTTP reports a black-box run whose process died, from its
// journal, and writes its files into dir. What the journal holds is
// judged as an interrupted run's is (httpcheck.Interrupted): requests
// sent and never answered are unanswered, faults and the provider's
// charges in progress last to the journal's end, so that a violation in
// it stands (exit 1), and liveness, which the final probes judge, is
// not judged (exit 3 otherwise).
func recoverHTTP(dir string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	path := filepath.Join(dir, harness.JournalFile)
	f, err := os.Open(path)
	if err != nil {
		return exitUsage, fmt.Errorf("recheck: %v", err)
	}
	defer f.Close()
	jr, err := history.ReadJournal(f)
	if err != nil {
		return exitUsage, fmt.Errorf("recheck: %s: %v", path, err)
	}
	var run httpreport.Run
	if err := json.Unmarshal(jr.Notes[httpreport.JournalNote], &run); err != nil {
		return exitUsage, fmt.Errorf("recheck: %s: the run's line: %v", path, err)
	}
	h, ledger := history.New(), history.NewLedger()
	for _, s := range jr.Scenarios {
		h, ledger, run.Crashes = s.Hist, s.Ledger, s.Crashes
	}
	run.Interrupted = crashedHTTP
	// The declarations say what the run was to do: its final probes
	// never ran, whatever --settle said.
	probes := "final probes: none ran (the run's process died first): liveness is not judged"
	if e, ok := report.ReadEnded(dir); ok {
		// It finished, but could not write its files (a full disk): what
		// its journal holds is judged as a run cut short where the
		// journal stopped.
		run.Interrupted = fmt.Sprintf("where its journal stopped (%s); this report was recovered from its journal, %s", endedLine(e), harness.JournalFile)
		probes = "final probes: not judged (the run's journal may have stopped before them)"
	}
	run.Interrupted += jr.Unread()
	run.Declared = append(run.Declared, probes)
	results, code := judgeHTTP(run, h, ledger)
	if err := httpreport.WriteDir(dir, run, h, ledger, results); err != nil {
		fmt.Fprintf(stderr, "idemcheck: writing %s: %v (the verdict stands)\n", dir, err)
	} else {
		report.DropEnded(dir)
	}
	if asJSON {
		return code, printJSON(stdout, map[string]any{"dir": dir, "pass": false, "recovered": true, "results": results})
	}
	fmt.Fprintf(stdout, "recovered the black-box run %s from its journal\n\n", dir)
	if err := httpreport.Write(stdout, run, h, ledger, results); err != nil {
		return exitUsage, err
	}
	fmt.Fprintln(stdout, httpreport.Closing(results))
	return code, nil
}

// notRestarted names the instances that exited by themselves and were not
// restarted, one line each ([httpcheck.Down]).
func notRestarted(cs []history.Crash) []string {
	var out []string
	for _, c := range cs {
		if c.Restarted == 0 && !strings.HasPrefix(c.Err, "the run was over") { // one after the probes left none out
			out = append(out, fmt.Sprintf("instance %s, exited by itself at %s (%s), was not restarted: %s", c.Instance, history.Millis(c.At), c.Status, c.Err))
		}
	}
	return out
}
