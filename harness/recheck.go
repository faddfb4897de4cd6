package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
)

// LoadRun reads a results directory: its summary.json and, from its
// history.jsonl, each scenario run's history and ledger, attached to its
// result by its identity (results.ID). A scenario run that recorded store
// calls but whose history is not in history.jsonl is an error: a re-check
// must judge what was run, never pass on nothing.
func LoadRun(dir string) (*results.Summary, error) {
	return loadRun(dir, history.Load)
}

// LoadRunSpilled is LoadRun for a run of millions of calls: each
// scenario's history spills to a folder of the run's [SpillDir] as it
// loads (history.LoadSpilled), so that loading and judging it hold a
// part at a time. Call done once the histories are no longer read: it
// removes that folder. Once ctx ends (an interrupt) it stops reading,
// with ctx's error: loading a history of gigabytes went on deaf to it.
func LoadRunSpilled(ctx context.Context, dir string) (sum *results.Summary, done func(), err error) {
	spill := filepath.Join(dir, SpillDir, fmt.Sprintf("load-%d", os.Getpid()))
	done = func() {
		_ = os.RemoveAll(spill)
		_ = os.Remove(filepath.Join(dir, SpillDir)) // only when empty: a live run's stays
	}
	sum, err = loadRun(dir, func(r io.Reader) ([]history.Saved, error) {
		return history.LoadSpilled(ctxReader{ctx, r}, spill, DefaultSpillAfter)
	})
	if err != nil {
		done()
		return nil, nil, err
	}
	return sum, done, nil
}

// ctxReader reads r until ctx ends, then fails with ctx's error.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// loadRun is LoadRun, its history.jsonl read by load.
func loadRun(dir string, load func(io.Reader) ([]history.Saved, error)) (*results.Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return nil, err
	}
	var sum results.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, "summary.json"), err)
	}
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	saved, err := load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v%s", filepath.Join(dir, "history.jsonl"), err, savedVerdict(&sum))
	}
	byID := map[string]history.Saved{}
	for _, s := range saved {
		byID[s.Scenario] = s
	}
	for i := range sum.Scenarios {
		r := &sum.Scenarios[i]
		s, ok := byID[r.ID().String()]
		if !ok {
			if r.Verdict != check.Skipped && r.Ops > 0 {
				return nil, fmt.Errorf("%s: no history of %s, which recorded %d store calls: the run's files are incomplete",
					filepath.Join(dir, "history.jsonl"), r.ID(), r.Ops)
			}
			continue
		}
		if err := wholeHistory(r, s); err != nil {
			return nil, fmt.Errorf("%s: %v%s", filepath.Join(dir, "history.jsonl"), err, savedVerdict(&sum))
		}
		r.Attach(s.Hist, s.Ledger)
	}
	return &sum, nil
}

// savedVerdict is what a recheck that cannot judge a run's history again
// still says of it: the verdict the run gave when it ended, on its whole
// history (summary.json).
func savedVerdict(sum *results.Summary) string {
	return fmt.Sprintf("; the run's own verdict, given when it ended on its whole history (summary.json): %s", strings.ToUpper(string(sum.Verdict)))
}

// wholeHistory checks a scenario's saved history against the counts its
// result recorded when it ran (measure's: store calls, work runs,
// charges): a history.jsonl cut at a line's end loads as a shorter
// history, which a recheck would judge as if it were the run's, a pass
// from half the evidence, or a FAIL of a service whose charges were cut
// off.
func wholeHistory(r *results.ScenarioResult, s history.Saved) error {
	var got results.ScenarioResult
	measure(&got, s.Hist, s.Ledger, scenario.Record{})
	// Fewer only: a run saved by an older build counted by its own
	// measure, and a recheck after an upgrade is what recheck is for.
	if got.Ops < r.Ops || got.WorkRuns < r.WorkRuns || got.Charges < r.Charges {
		return fmt.Errorf("the history of %s holds %d store calls, %d work runs and %d charges, and the run recorded %d, %d and %d: the file is not the whole run's (cut short); recheck judges only a whole history",
			r.ID(), got.Ops, got.WorkRuns, got.Charges, r.Ops, r.WorkRuns, r.Charges)
	}
	return nil
}

// Recheck judges a loaded run's histories again with the current
// checkers (Judge), by the params each scenario was judged by, and returns
// the new summary (the saved one is left as it was). A scenario that was
// skipped, or has no history or params, keeps its saved result.
func Recheck(ctx context.Context, saved *results.Summary) *results.Summary {
	sum := *saved
	sum.Scenarios = make([]results.ScenarioResult, len(saved.Scenarios))
	sum.Violations = []check.Violation{}
	// A scenario an interrupt cut short is judged as it was, the
	// verdicts a cut can fake undecided (Judged.cutShort): a recheck of an
	// interrupted --strict-availability run failed a correct store on the
	// calls the run had cancelled itself. A run saved before scenarios
	// said so has every scenario of an interrupted run judged that way.
	flagged := false
	for _, s := range saved.Scenarios {
		flagged = flagged || s.Interrupted
	}
	for i, s := range saved.Scenarios {
		if s.History() != nil && s.Check != nil && s.Verdict != check.Skipped {
			var j Judged
			if s.Cut != nil { // cut short by its process's death: judged as Recover judged it
				j, s.Error = JudgeCut(ctx, *s.Check, s.History(), s.Ledger(), s.Cut), ""
			} else {
				j = Judge(ctx, *s.Check, s.History(), s.Ledger(), nil, false)
				if s.Interrupted || saved.Interrupted && !flagged {
					j.cutShort()
				}
			}
			s.Checkers, s.Violations, s.Verdict = j.Checkers, j.Violations, j.Verdict
			if j.Why != "" && s.Error == "" {
				s.Error = j.Why
			}
			if s.Error != "" && s.Verdict == check.Pass {
				s.Verdict = check.Unknown // the workload did not finish, as when it ran
			}
		}
		sum.Scenarios[i] = s
		sum.Violations = append(sum.Violations, s.Violations...)
	}
	sum.Verdict = runVerdict(sum.Scenarios, sum.Interrupted) // a run cut short stays so
	return &sum
}
