package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/mutate"
	"github.com/idemcheck/idemcheck/internal/buildinfo"
)

// A mutate run keeps, in its results directory, a line journal
// (runjournal.go): its head first, then its plan (the mutants generated
// and chosen, before the correct store runs), a line as each of the
// correct store's runs ends and one as each mutant gets its final
// verdict. A run whose process dies (a CI job's time limit, a kill -9)
// is reported from it by recheck: what finished stands, the rest is
// "not finished" or "interrupted", and the verdict is at best undecided.

// mutateKind is the type of a mutate run's first journal line.
const mutateKind = "mutate"

// mutateHead is a mutate run's first journal line: what it runs, and the
// lowest passing score its verdict needs.
type mutateHead struct {
	lineHead
	Seed     int64   `json:"seed"`
	MinScore float64 `json:"min_score"`
}

// mutateLine is a journal line after the head: "plan" (the report with
// its mutants and no verdicts, mutate.Options.Planned), "baseline" (one
// of the correct store's runs ended) or "done" (a mutant's final
// verdict).
type mutateLine struct {
	Type     string              `json:"type"`
	Plan     *mutate.Report      `json:"plan,omitempty"`
	Baseline *mutate.BaselineRun `json:"baseline,omitempty"`
	Result   *mutate.Result      `json:"result,omitempty"`
}

// journalMutate records the run's plan, the correct store's runs and
// each mutant's verdict in j as they come, keeping mo's own Progress. A
// journal that stops writing is said once: the run goes on.
func journalMutate(mo *mutate.Options, j *lineJournal, stderr io.Writer) {
	add := j.adder(stderr)
	mo.Planned = func(plan *mutate.Report) { add(mutateLine{Type: "plan", Plan: plan}) }
	mo.BaselineDone = func(b mutate.BaselineRun) { add(mutateLine{Type: "baseline", Baseline: &b}) }
	progress := mo.Progress
	mo.Progress = func(done, total int, r mutate.Result) {
		add(mutateLine{Type: "done", Result: &r})
		if progress != nil {
			progress(done, total, r)
		}
	}
}

// foldMutate rebuilds a mutate run's report from its journal's lines
// after the head: the plan, each of the correct store's runs that ended
// (the others not finished), each mutant's final verdict (the others
// interrupted), marked interrupted. nil when the plan is not there: the
// process died before it had generated its mutants.
func foldMutate(lines []journalLine) (rep *mutate.Report, torn int) {
	baselines := map[string]mutate.BaselineRun{}
	results := map[string]mutate.Result{}
	for _, l := range lines {
		var ml mutateLine
		if json.Unmarshal(l.Raw, &ml) != nil {
			torn++
			continue
		}
		switch {
		case ml.Type == "plan" && ml.Plan != nil && rep == nil:
			rep = ml.Plan
		case ml.Type == "baseline" && ml.Baseline != nil:
			baselines[ml.Baseline.Scenario] = *ml.Baseline
		case ml.Type == "done" && ml.Result != nil:
			results[ml.Result.ID] = *ml.Result
		}
	}
	if rep == nil {
		return nil, torn
	}
	rep.Interrupted = true
	rep.Baseline = make([]mutate.BaselineRun, len(rep.Scenarios))
	for i, sc := range rep.Scenarios {
		b, ok := baselines[sc]
		if !ok {
			b = mutate.BaselineRun{Scenario: sc, Interrupted: true}
		}
		rep.Baseline[i] = b
	}
	for i, r := range rep.Results {
		if f, ok := results[r.ID]; ok {
			rep.Results[i] = f
		} else {
			rep.Results[i].Verdict = mutate.Interrupted
		}
	}
	if !rep.BaselinePassed() {
		rep.Results = []mutate.Result{} // no mutant runs before the correct store has passed
	}
	rep.Tally()
	return rep, torn
}

// recoverMutate reports a mutate run whose process died, from its
// journal (foldMutate), and writes the report as the run's summary.json.
func recoverMutate(dir string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	how := howEnded(dir, crashedMutants) // read before the summary below replaces its last word
	path := filepath.Join(dir, harness.JournalFile)
	var head mutateHead
	lines, torn, ok, err := readJournal(path, mutateKind, &head)
	if err != nil {
		return exitUsage, err
	}
	if !ok {
		return recoverTorn(dir, asJSON, stdout) // killed while it wrote its head
	}
	rep, cut := foldMutate(lines[1:])
	torn += cut
	if rep == nil {
		const why = "its process died before it had generated its mutants: nothing ran, nothing was judged"
		if asJSON {
			return exitUnknown, printJSON(stdout, map[string]any{"dir": dir, "recovered": true, "verdict": "unknown", "why": why})
		}
		fmt.Fprintf(stdout, "the mutate run in %s ended before it finished: %s\nexit 3: undecided\n", dir, why)
		return exitUnknown, nil
	}
	if st, err := os.Stat(path); err == nil {
		rep.Seconds = st.ModTime().Sub(head.Started).Seconds()
	}
	abs, _ := filepath.Abs(dir)
	sum := mutateJSON{Report: rep, MinScore: head.MinScore, Verdict: codeVerdict(mutateExit(rep, head.MinScore)), Recovered: true, Dir: abs, Shard: recoveredShard(head.Argv)}
	if sum.Shard != nil {
		sum.Shard.MinScore = head.MinScore
	}
	if err := writeSummaryJSON(dir, sum); err != nil {
		fmt.Fprintf(stderr, "idemcheck: writing %s: %v (the verdict stands)\n", dir, err)
	}
	code := mutateExit(rep, head.MinScore)
	if asJSON {
		return code, printJSON(stdout, sum)
	}
	fmt.Fprintf(stdout, "recovered the mutate run %s from its journal: %s\n", dir, how)
	if torn > 0 {
		fmt.Fprintf(stdout, "(%d journal line(s) cut or unreadable, left out: a mutant whose line is lost reads as interrupted)\n", torn)
	}
	fmt.Fprintln(stdout)
	printMutate(stdout, rep, head.MinScore)
	switch {
	case code == exitFail && !rep.BaselineFailed():
		fmt.Fprintln(stdout, "exit 1: the survivors judged before the run ended keep its score below the minimum, whatever the rest")
	case code == exitFail:
		fmt.Fprintln(stdout, "exit 1: the correct store failed a scenario before the run ended: no kill means anything")
	default:
		fmt.Fprintln(stdout, "exit 3: undecided: the run did not finish, and nothing it finished proves a failure")
	}
	return code, nil
}

// recheckMutateSummary prints a finished mutate run's saved report: its
// mutants' runs keep no history to judge again, so the verdict is the one
// saved.
func recheckMutateSummary(dir string, asJSON bool, stdout io.Writer) (int, error) {
	var sum mutateJSON
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	if err != nil || sum.Report == nil {
		return exitUsage, fmt.Errorf("recheck: %s/summary.json: not a mutate run's summary (%v)", dir, err)
	}
	code := mutateExit(sum.Report, sum.MinScore)
	if asJSON {
		return code, printJSON(stdout, sum)
	}
	fmt.Fprintf(stdout, "the mutate run %s, as it was saved (its mutants' runs keep no history to judge again), with %s\n\n", dir, buildinfo.Get())
	printMutate(stdout, sum.Report, sum.MinScore)
	return code, nil
}
