package hunt

import (
	"fmt"
	"slices"

	"github.com/idemcheck/idemcheck/harness/check"
)

// A matrix is many jobs, each ending on its own: a mutant hunted on a
// seed, or the correct store run on a kill scenario and seed. A run that
// is cut short (interrupted, or its process killed) has finished some
// of them; what they prove stands, and the rest must be named. So the
// matrix is folded from the jobs that finished, whoever kept them: the
// run itself as it ends, or a journal read back after its process died.

// Job is one job of a matrix: Mutant hunted with its kill scenario on
// Seed, or, with Mutant "", the correct store run on Scenario and Seed.
type Job struct {
	Mutant   string `json:"mutant,omitempty"`
	Scenario string `json:"scenario"`
	Seed     int64  `json:"seed"`
}

// String names the job as a report lists it.
func (j Job) String() string {
	if j.Mutant == "" {
		return fmt.Sprintf("the correct store on %s, seed %d", j.Scenario, j.Seed)
	}
	return fmt.Sprintf("%s on seed %d", j.Mutant, j.Seed)
}

// Done is a job that finished: its hunt's Kill, or the correct store's run.
type Done struct {
	Job
	Kill    *Kill       `json:"kill,omitempty"`
	Correct *CorrectRun `json:"correct,omitempty"`
}

// Unfinished is a job of a matrix that did not finish: Started says it
// was cut short, else it never ran.
type Unfinished struct {
	Job
	Started bool `json:"started"`
}

// MatrixJobs lists the jobs of a matrix in the order they are done:
// each mutant on each seed from seed, then the correct store on each kill
// scenario of the mutants and each seed.
func MatrixJobs(mutants []string, seed int64, seeds int) []Job {
	var jobs []Job
	for _, m := range mutants {
		name, _, _ := MutantScenario(m)
		for s := range seeds {
			jobs = append(jobs, Job{Mutant: m, Scenario: name, Seed: seed + int64(s)})
		}
	}
	scenarios := KillScenarios(mutants)
	for s := range seeds {
		for _, name := range scenarios {
			jobs = append(jobs, Job{Scenario: name, Seed: seed + int64(s)})
		}
	}
	return jobs
}

// Matrix folds the jobs of rep's matrix (MatrixJobs of mutants, rep.Seed
// and rep.Seeds) that finished into rep's rows and the correct store's
// verdict, and lists the others in rep.Unfinished, those in began as cut
// short. A mutant is killed when it died on every seed, a survivor when
// a finished hunt of it survived (whatever did not finish), and
// undecided otherwise; the correct store fails on a failed run, is
// undecided when a run was undecided or did not finish, and reads "not
// run" (an empty verdict) when none finished. The one fold of a matrix:
// RunMutants's, and a dead run's recovered from its journal.
func Matrix(rep *MutantsReport, mutants []string, done []Done, began []Job) {
	byJob := map[Job]Done{}
	for _, d := range done {
		byJob[d.Job] = d
	}
	rep.Mutants, rep.Unfinished = nil, nil
	var cruns []*CorrectRun
	unfinished := func(j Job) {
		rep.Unfinished = append(rep.Unfinished, Unfinished{Job: j, Started: slices.Contains(began, j)})
	}
	for _, j := range MatrixJobs(mutants, rep.Seed, rep.Seeds) {
		d, ok := byJob[j]
		switch {
		case j.Mutant != "":
			if !ok || d.Kill == nil {
				unfinished(j)
			}
		case ok && d.Correct != nil:
			cruns = append(cruns, d.Correct)
		default:
			unfinished(j)
			cruns = append(cruns, nil)
		}
	}
	for _, m := range mutants {
		var kills []*Kill
		for s := range rep.Seeds {
			kills = append(kills, byJob[Job{Mutant: m, Scenario: scenarioOf(m), Seed: rep.Seed + int64(s)}].Kill)
		}
		if row, ok := foldRow(m, kills); ok {
			rep.Mutants = append(rep.Mutants, row)
		}
	}
	rep.Correct = foldCorrect(cruns)
}

// scenarioOf is the scenario meant to kill the mutant.
func scenarioOf(mutant string) string {
	name, _, _ := MutantScenario(mutant)
	return name
}

// foldRow makes a mutant's row from its hunts, one a seed (nil: it did
// not finish); ok is false when none finished.
func foldRow(m string, kills []*Kill) (MutantReport, bool) {
	row := MutantReport{Name: m, Seeds: len(kills), Runs: []Kill{}, Trace: []string{}, Checkers: []string{}}
	var secs []float64
	counts := map[string]int{}
	finished := false
	for _, k := range kills {
		if k == nil {
			row.Unfinished++
			continue
		}
		finished = true
		row.Side, row.Scenario = k.Side, k.Scenario
		if k.Skipped != "" {
			row.Skipped = k.Skipped
			break
		}
		row.Runs = append(row.Runs, *k)
		if !k.Killed {
			continue
		}
		row.Kills++
		secs = append(secs, k.Seconds)
		counts[k.Checker]++
		if row.Kills == 1 || len(k.Trace) < len(row.Trace) {
			row.Trace, row.Schedule, row.Detail = k.Trace, k.Schedule, k.Detail
		}
		for _, c := range k.Checkers {
			if !slices.Contains(row.Checkers, c) {
				row.Checkers = append(row.Checkers, c)
			}
		}
	}
	if row.Skipped != "" {
		row.Unfinished = 0
	}
	row.Killed = row.Skipped == "" && row.Kills == len(kills)
	row.Seconds = Median(secs)
	for _, x := range secs {
		row.MaxSeconds = max(row.MaxSeconds, x)
	}
	row.Checker = mostCommon(counts)
	return row, finished
}

// foldCorrect folds the correct store's runs (nil: not finished) into
// its report: a failure fails it, an undecided or unfinished run leaves
// it undecided, and none finished leaves its verdict empty (not run).
func foldCorrect(runs []*CorrectRun) CorrectReport {
	cr := CorrectReport{Verdict: check.Pass, Runs: []CorrectRun{}}
	for _, run := range runs {
		if run == nil {
			if cr.Verdict == check.Pass {
				cr.Verdict = check.Unknown
			}
			continue
		}
		switch {
		case run.Verdict == check.Fail:
			cr.Verdict = check.Fail
		case run.Verdict == check.Unknown && cr.Verdict == check.Pass:
			cr.Verdict = check.Unknown
		}
		cr.Runs = append(cr.Runs, *run)
	}
	if len(cr.Runs) == 0 && len(runs) > 0 {
		cr.Verdict = ""
	}
	return cr
}
