package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/internal/buildinfo"
)

// A mutants run keeps, in its results directory, a line journal
// (runjournal.go): its plan first, then a line as each job (a mutant's
// hunt on a seed, the correct store's run on a scenario and seed) starts
// and as it finishes, with its verdict. A run whose process dies is
// folded from it (hunt.Matrix) by recheck, as the run folds its own.

// mutantsKind is the type of a mutants run's first journal line.
const mutantsKind = "mutants"

// mutantsHead is a mutants run's first journal line: what it hunts.
type mutantsHead struct {
	lineHead
	Seed    int64    `json:"seed"`
	Seeds   int      `json:"seeds"`
	Mutants []string `json:"mutants"`
}

// mutantsLine is a job's journal line: "began" as it starts, "done" as
// it finishes, with its verdict (killed, survived or skipped for a hunt;
// the correct store's for its run) and the checker that killed it.
type mutantsLine struct {
	Type string `json:"type"`
	hunt.Done
	Verdict string `json:"verdict,omitempty"`
	Checker string `json:"checker,omitempty"`
}

// mutantsJSON is mutants' --json report and its summary.json: the
// matrix, its verdict, and with --shard what the merge needs.
type mutantsJSON struct {
	*hunt.MutantsReport
	Verdict check.Verdict `json:"verdict"`
	// Interrupted: the run was cut short (an interrupt, or its process
	// died and Recovered says this was read back from its journal).
	Interrupted bool       `json:"interrupted"`
	Recovered   bool       `json:"recovered,omitempty"`
	Dir         string     `json:"results_dir,omitempty"`
	Shard       *shardInfo `json:"shard,omitempty"`
}

// journalMutants records each job of the run in j as it starts and ends.
// A journal that stops writing is said once: the run goes on.
func journalMutants(mo *hunt.MutantsOptions, j *lineJournal, stderr io.Writer) {
	add := j.adder(stderr)
	mo.Began = func(job hunt.Job) { add(mutantsLine{Type: "began", Done: hunt.Done{Job: job}}) }
	mo.Finished = func(d hunt.Done) {
		l := mutantsLine{Type: "done", Done: d}
		switch {
		case d.Correct != nil:
			l.Verdict = string(d.Correct.Verdict)
		case d.Kill.Skipped != "":
			l.Verdict = "skipped"
		case d.Kill.Killed:
			l.Verdict, l.Checker = "killed", d.Kill.Checker
		default:
			l.Verdict = "survived"
		}
		add(l)
	}
}

// mutantsCode is the exit code of a matrix's verdict: 1 when what
// finished proves a failure, 3 when not everything was judged, else 0.
func mutantsCode(rep *hunt.MutantsReport) int {
	switch rep.Verdict() {
	case check.Fail:
		return exitFail
	case check.Pass:
		return exitPass
	}
	return exitUnknown
}

// mutantsWhy says which exit code applies to the matrix and why.
func mutantsWhy(rep *hunt.MutantsReport) string {
	switch code := mutantsCode(rep); {
	case code == exitFail && len(rep.Survivors()) > 0:
		return fmt.Sprintf("exit 1: a finished hunt proves a failure: %s survived (each mutant must die on every seed)", strings.Join(rep.Survivors(), ", "))
	case code == exitFail:
		return "exit 1: the correct store failed a run that finished"
	case code == exitUnknown && len(rep.Unfinished) > 0:
		return fmt.Sprintf("exit 3: undecided: %d job(s) did not finish, and nothing that finished proves a failure", len(rep.Unfinished))
	case code == exitUnknown:
		return "exit 3: undecided: a run of the correct store could not be decided"
	}
	return "exit 0: every mutant killed on every seed, the correct store passed"
}

// printUnfinished lists the jobs of a matrix that did not finish: each
// one cut short, and those that never ran (the first few of them).
func printUnfinished(w io.Writer, rep *hunt.MutantsReport) {
	if len(rep.Unfinished) == 0 {
		return
	}
	var cut, never []string
	for _, u := range rep.Unfinished {
		if u.Started {
			cut = append(cut, u.String())
		} else {
			never = append(never, u.String())
		}
	}
	fmt.Fprintf(w, "\nnot finished: %d job(s), neither killed nor survived (a mutant's hunt) or not judged (the correct store's run)\n", len(rep.Unfinished))
	for _, c := range cut {
		fmt.Fprintf(w, "  cut short: %s\n", c)
	}
	const shown = 8
	for i, n := range never {
		if i == shown {
			fmt.Fprintf(w, "  never ran: and %d more\n", len(never)-shown)
			break
		}
		fmt.Fprintf(w, "  never ran: %s\n", n)
	}
}

// recoverMutants reports a mutants run whose process died, from its
// journal: the matrix of the jobs that finished (hunt.Matrix), the
// jobs that did not, and the exit code what finished allows; it writes
// the report as the run's summary.json.
func recoverMutants(dir string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	how := howEnded(dir, crashedMutants) // read before the summary below replaces its last word
	path := filepath.Join(dir, harness.JournalFile)
	var head mutantsHead
	lines, torn, ok, err := readJournal(path, mutantsKind, &head)
	if err != nil {
		return exitUsage, err
	}
	if !ok {
		return recoverTorn(dir, asJSON, stdout) // killed while it wrote its plan
	}
	var done []hunt.Done
	var began []hunt.Job
	for _, l := range lines[1:] {
		var ml mutantsLine
		if json.Unmarshal(l.Raw, &ml) != nil {
			torn++
			continue
		}
		switch {
		case ml.Type == "began":
			began = append(began, ml.Job)
		case ml.Type == "done" && (ml.Kill != nil || ml.Correct != nil):
			done = append(done, ml.Done)
		}
	}
	rep := &hunt.MutantsReport{Store: head.Store, Seed: head.Seed, Seeds: max(head.Seeds, 1)}
	hunt.Matrix(rep, head.Mutants, done, began)
	if st, err := os.Stat(path); err == nil {
		rep.Seconds = st.ModTime().Sub(head.Started).Seconds()
	}
	abs, _ := filepath.Abs(dir)
	sum := mutantsJSON{MutantsReport: rep, Verdict: rep.Verdict(), Interrupted: true, Recovered: true, Dir: abs, Shard: recoveredShard(head.Argv)}
	if err := writeSummaryJSON(dir, sum); err != nil {
		fmt.Fprintf(stderr, "idemcheck: writing %s: %v (the verdict stands)\n", dir, err)
	}
	if asJSON {
		return mutantsCode(rep), printJSON(stdout, sum)
	}
	fmt.Fprintf(stdout, "recovered the mutants run %s from its journal: %s\n", dir, how)
	if torn > 0 {
		fmt.Fprintf(stdout, "(%d journal line(s) cut or unreadable, left out: a job whose line is lost reads as not finished)\n", torn)
	}
	fmt.Fprintln(stdout)
	printMutants(stdout, rep)
	fmt.Fprintf(stdout, "%s\n", mutantsWhy(rep))
	return mutantsCode(rep), nil
}

// crashedMutants says how a recovered mutants run ended.
const crashedMutants = "its process ended before the run finished (killed, stopped at once by a second interrupt, out of memory, or the machine stopped); what it finished stands, the rest is named below"

// recheckMutantsSummary prints a finished mutants run's saved matrix: a
// hunt keeps no history to judge again, so its verdict is the one saved.
func recheckMutantsSummary(dir string, asJSON bool, stdout io.Writer) (int, error) {
	var sum mutantsJSON
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	if err != nil || sum.MutantsReport == nil {
		return exitUsage, fmt.Errorf("recheck: %s/summary.json: not a mutants run's summary (%v)", dir, err)
	}
	if asJSON {
		return mutantsCode(sum.MutantsReport), printJSON(stdout, sum)
	}
	fmt.Fprintf(stdout, "the mutants run %s, as it was saved (a hunt keeps no history to judge again), with %s\n\n", dir, buildinfo.Get())
	printMutants(stdout, sum.MutantsReport)
	fmt.Fprintf(stdout, "%s\n", mutantsWhy(sum.MutantsReport))
	return mutantsCode(sum.MutantsReport), nil
}
