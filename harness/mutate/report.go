package mutate

// A mutation run's report: each mutant's verdict, the correct store's
// runs, the counts and the score.

// The verdicts of a generated mutant.
const (
	Killed     = "killed"
	Survived   = "survived"
	Equivalent = "equivalent"
	// Refuted: the backend argued the mutant equivalent, and a checker
	// killed it: the argument is wrong (counted as killed, and reported).
	Refuted = "refuted"
	// Invalid: the store could not open or run with the edit (a script
	// the server refuses to load): not a behaviour, not scored.
	Invalid = "invalid"
	// Unjudged: the run could not be set up with the correct statements
	// either (a server that timed out on a loaded machine), after
	// setupTries tries: the machine's failure, not the edit's; or every
	// scenario it would run was skipped on the correct store (noneRan).
	// Not scored, and a run with one is undecided, never a pass.
	Unjudged = "unjudged"
	// Interrupted: the run was interrupted before the mutant's scenarios
	// ended, or before it began: not a survivor (its budget was not
	// spent), not scored, and the run is undecided. A kill found before
	// the interrupt stays a kill.
	Interrupted = "interrupted"
)

// Result is one generated mutant's verdict.
type Result struct {
	Mutant
	Verdict string `json:"verdict"`
	// Scenario and Checker: what killed it; Detail: the checker's words.
	Scenario string   `json:"scenario,omitempty"`
	Checker  string   `json:"checker,omitempty"`
	Detail   string   `json:"detail,omitempty"`
	Episodes int      `json:"episodes,omitempty"`
	Seconds  float64  `json:"seconds"`
	Argument string   `json:"argument,omitempty"` // equivalent, refuted
	Error    string   `json:"error,omitempty"`    // invalid
	Diff     []string `json:"diff"`
}

// Report is a mutation run of one backend.
type Report struct {
	Store string `json:"store"`
	// NotApplicable says why the backend has no statements to mutate.
	NotApplicable string      `json:"not_applicable,omitempty"`
	Seed          int64       `json:"seed"`
	Scenarios     []string    `json:"scenarios"`
	Statements    []Statement `json:"statements"`
	// Baseline is the correct store on the same scenarios and budgets: it
	// must pass, or no kill means anything.
	Baseline []BaselineRun `json:"baseline"`
	Results  []Result      `json:"mutants"`
	// Quick and Budget are each mutant's budgets per scenario, in
	// seconds: the first pass's and the survivors' second (0: not run,
	// or not recorded).
	Quick  float64 `json:"quick,omitempty"`
	Budget float64 `json:"budget,omitempty"`
	// Counts are the verdicts of every result; its Score is the share of
	// the mutants that are not equivalent (and valid) that a checker
	// caught.
	Counts
	// Kinds is the count per rewrite (Counts): which classes of edit the
	// workload reaches.
	Kinds []KindCounts `json:"kinds"`
	// UnusedArguments are equivalence arguments of the backend that no
	// generated mutant matches (a statement changed under them).
	UnusedArguments []string `json:"unused_arguments,omitempty"`
	Seconds         float64  `json:"seconds"`
	// Interrupted: the run was stopped (SIGINT, SIGTERM) before it
	// ended; what it judged is reported, and its verdict is undecided
	// unless the correct store failed.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Counts are one rewrite's, or the whole run's, verdicts counted.
type Counts struct {
	Killed     int `json:"killed"` // refuted arguments included
	Survived   int `json:"survived"`
	Equivalent int `json:"equivalent"`
	Invalid    int `json:"invalid"`
	Unjudged   int `json:"unjudged,omitempty"`
	// Interrupted counts the mutants an interrupt left unjudged.
	Interrupted int `json:"interrupted_mutants,omitempty"`
	// Score is killed / (killed + survived), 0 when both are 0.
	Score float64 `json:"score"`
}

// add counts one verdict.
func (t *Counts) add(verdict string) {
	switch verdict {
	case Killed, Refuted:
		t.Killed++
	case Survived:
		t.Survived++
	case Equivalent:
		t.Equivalent++
	case Invalid:
		t.Invalid++
	case Unjudged:
		t.Unjudged++
	case Interrupted:
		t.Interrupted++
	}
	if n := t.Killed + t.Survived; n > 0 {
		t.Score = float64(t.Killed) / float64(n)
	}
}

// KindCounts is one rewrite's share of a run: the reach of the workload on
// one class of edit.
type KindCounts struct {
	Kind Kind `json:"kind"`
	Counts
}

// Tally counts the results' verdicts into the report's totals and score,
// and into one row per rewrite that made a mutant (in Kinds' order): the
// one count a run and a merge of shards both use.
func (r *Report) Tally() {
	var all Counts
	by := map[Kind]*Counts{}
	for _, x := range r.Results {
		all.add(x.Verdict)
		if by[x.Kind] == nil {
			by[x.Kind] = &Counts{}
		}
		by[x.Kind].add(x.Verdict)
	}
	r.Counts = all
	r.Kinds = []KindCounts{}
	for _, k := range Kinds {
		if t := by[k]; t != nil {
			r.Kinds = append(r.Kinds, KindCounts{Kind: k, Counts: *t})
		}
	}
}

// BaselineRun is the correct store on one scenario.
type BaselineRun struct {
	Scenario string  `json:"scenario"`
	Passed   bool    `json:"passed"`
	Skipped  string  `json:"skipped,omitempty"`
	Checker  string  `json:"checker,omitempty"`
	Detail   string  `json:"detail,omitempty"`
	Seconds  float64 `json:"seconds"`
	// Interrupted: the run was interrupted before this scenario ended
	// (or began) on the correct store: neither a pass nor a failure.
	Interrupted bool `json:"interrupted,omitempty"`
}

// BaselinePassed reports whether the correct store passed every scenario.
func (r *Report) BaselinePassed() bool {
	for _, b := range r.Baseline {
		if !b.Passed {
			return false
		}
	}
	return true
}

// BaselineFailed reports whether the correct store failed a scenario it
// ran to its end (or was caught failing before an interrupt): then no
// kill means anything, and the run fails, interrupted or not.
func (r *Report) BaselineFailed() bool {
	for _, b := range r.Baseline {
		if !b.Passed && !b.Interrupted {
			return true
		}
	}
	return false
}

// Settled is a finished mutant's result with its backend's argument
// applied: one argued equivalent that survived is Equivalent, one killed
// is Refuted (the argument is wrong).
func Settled(r Result) Result {
	if r.Argument != "" {
		switch r.Verdict {
		case Survived:
			r.Verdict = Equivalent
		case Killed:
			r.Verdict = Refuted
		}
	}
	return r
}
