package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
)

// JournalFile is the name of a run's journal in its results directory
// (Options.Journal): there while the run runs, removed once its files are
// written. A results directory that has one and no summary.json is a
// run whose process died: Recover reports it.
const JournalFile = history.JournalFile

// SpillDir is the folder of a run's results directory where its largest
// histories go while it runs (Options.SpillDir): removed once the run's
// files are written, and by Recover, since a spilled history is only
// whole with the memory of the process that wrote it.
const SpillDir = "spill"

// The kinds of the harness's own journal lines (history.Journal.Note).
const (
	noteRun    = "run"    // the run: its summary before any scenario ran, and its plan
	noteStart  = "start"  // a scenario started: what it is judged by
	noteParams = "params" // a scenario's final probes start: what it is judged by now
	noteResult = "result" // a scenario finished: its result
)

// journalRun is the run's first journal line.
type journalRun struct {
	Summary *results.Summary `json:"summary"`
	Plan    []string         `json:"plan"`
}

// journalStart is a scenario's first journal line.
type journalStart struct {
	// Started is the wall-clock origin of the scenario's history: with
	// its last recorded time, when it last recorded (a recovered run's
	// end, which the journal file's time is not once the file is copied).
	Started    time.Time        `json:"started,omitzero"`
	Doc        string           `json:"doc"`
	Repetition int              `json:"repetition"`
	Retention  results.Duration `json:"retention"`
	LockTTL    results.Duration `json:"lock_ttl"`
	Params     check.Params     `json:"params"`
}

// journalRunStart journals the run before its first scenario.
func (o Options) journalRunStart(sum *results.Summary, plan []string) {
	if o.Journal != nil {
		o.Journal.Note("", noteRun, journalRun{Summary: sum, Plan: plan})
	}
}

// journalResult journals a scenario's result (one skipped, too): a run
// recovered from its journal keeps it.
func (o Options) journalResult(res *results.ScenarioResult) {
	if o.Journal != nil {
		o.Journal.Note(res.ID().String(), noteResult, res)
	}
}

// Crashed is results.Summary.Stopped of a run recovered from its journal.
const Crashed = "the run's process ended before the run finished (killed, stopped at once by a second interrupt, out of memory, or the machine stopped); this report was recovered from its journal, " + JournalFile

// prefixSound are the checkers whose violations stand on a history cut
// short: each names calls and charges that happened, and a call cut off
// in flight is of unknown outcome, which they allow for. The others read
// what a cut can hide: the faults in progress (recorded when they end)
// excuse an owner's overlap and a store's errors, and the final probes
// never ran.
var prefixSound = []string{check.AtMostOnce, check.Fencing, check.Replay, check.Mismatch, check.Linearizable}

// Recover reports a run whose process died, from the journal at path:
// each scenario that finished keeps its result; each that was cut short
// is judged on what it recorded (Judge), its calls in flight of unknown
// outcome, and is at best undecided (a violation that a cut cannot fake
// still fails it, see prefixSound); the rest never ran. The summary is
// cut short (Summary.Stopped is [Crashed]) and never a pass. The dead
// run's [SpillDir] beside the journal goes: the journal holds every call.
// A scenario of millions of calls is read back spilling into a new one
// (history.ReadJournalSpilled), which the caller removes once the
// recovered run's files are written.
func Recover(ctx context.Context, path string) (*results.Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_ = os.RemoveAll(filepath.Join(filepath.Dir(path), SpillDir))
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	jr, err := history.ReadJournalSpilled(f, filepath.Join(filepath.Dir(path), SpillDir, "recover"), DefaultSpillAfter)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var run journalRun
	if raw, ok := jr.Notes[noteRun]; !ok {
		return nil, fmt.Errorf("%s: not the journal of a run (no %q line)", path, noteRun)
	} else if err := json.Unmarshal(raw, &run); err != nil || run.Summary == nil {
		return nil, fmt.Errorf("%s: the run's line: %v", path, err)
	}
	sum := run.Summary
	sum.Scenarios, sum.Violations, sum.NotRun = nil, []check.Violation{}, nil
	byID := map[string]*history.Journaled{}
	for _, s := range jr.Scenarios {
		byID[s.Scenario] = s
	}
	reps := map[string]int{}
	for _, name := range run.Plan {
		id := (&results.ScenarioResult{Name: name, Repetition: reps[name]}).ID().String()
		reps[name]++
		s, ok := byID[id]
		if !ok || s.Notes[noteStart] == nil && s.Notes[noteResult] == nil {
			sum.NotRun = append(sum.NotRun, id)
			continue
		}
		res, err := recovered(ctx, name, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v", path, id, err)
		}
		sum.Scenarios = append(sum.Scenarios, *res)
		sum.Violations = append(sum.Violations, res.Violations...)
	}
	sum.Ended = lastRecorded(jr)
	if sum.Ended.IsZero() { // journaled by an older build, or nothing recorded
		sum.Ended = st.ModTime()
	}
	sum.Seconds = sum.Ended.Sub(sum.Started).Seconds()
	sum.Interrupted, sum.Stopped = true, Crashed+jr.Unread()
	sum.Verdict = runVerdict(sum.Scenarios, true) // cut short: neither a pass nor nothing to judge
	return sum, nil
}

// Unwritten settles the summary Recover made from the journal of a run
// that finished but could not write its files (a full disk; its last
// word, report.Ended, says so): Stopped is why, instead of [Crashed];
// and a journal that holds every scenario's result is the whole run,
// judged as it ended (interrupted only if it was). A journal that
// stopped before the run ended (the disk filled while it ran) is still
// cut short where it stopped: what it did not record is not judged.
func Unwritten(sum *results.Summary, why string, interrupted bool) {
	sum.Stopped = why
	if len(sum.NotRun) > 0 {
		return
	}
	for _, s := range sum.Scenarios {
		if s.Cut != nil {
			return
		}
	}
	sum.Interrupted = interrupted
	sum.Verdict = runVerdict(sum.Scenarios, interrupted)
}

// recovered is the result of one journaled scenario run: the one it
// finished with, or one judged from what it recorded.
func recovered(ctx context.Context, name string, s *history.Journaled) (*results.ScenarioResult, error) {
	if raw := s.Notes[noteResult]; raw != nil {
		var res results.ScenarioResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, err
		}
		res.Attach(s.Hist, s.Ledger)
		return &res, nil
	}
	var start journalStart
	if err := json.Unmarshal(s.Notes[noteStart], &start); err != nil {
		return nil, err
	}
	p := start.Params
	if raw := s.Notes[noteParams]; raw != nil {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
	}
	cut := &results.Cut{InFlight: s.InFlight, Announced: s.Announced, InFlightPrune: s.InFlightPrune}
	res := &results.ScenarioResult{Name: name, Doc: start.Doc, Repetition: start.Repetition,
		Retention: start.Retention, LockTTL: start.LockTTL, Check: &p, Cut: cut}
	res.Attach(s.Hist, s.Ledger)
	j := JudgeCut(ctx, p, s.Hist, s.Ledger, cut)
	res.Checkers, res.Violations, res.Verdict, res.Error = j.Checkers, j.Violations, j.Verdict, j.Why
	res.Notes = append(res.Notes, j.Notes...) // what the history shows beside the verdicts, as a finished run says
	measure(res, s.Hist, s.Ledger, scenario.Record{})
	res.Seconds = time.Duration(lastTime(s.Hist)).Seconds()
	return res, nil
}

// JudgeCut judges the history of a scenario cut short by its process's
// death (Judge), by what the cut hides: a violation stands only where a
// cut cannot fake it (prefixSound), and the verdict is at best undecided,
// Why saying so. Recover and Recheck judge such a scenario by it.
func JudgeCut(ctx context.Context, p check.Params, hist *history.History, ledger *history.Ledger, cut *results.Cut) Judged {
	j := Judge(ctx, p, hist, ledger, nil, false)
	why := fmt.Sprintf("the run's process ended before this scenario finished: judged the %d store calls it recorded (%d in flight then, of unknown outcome)",
		hist.OpCount(), cut.InFlight)
	if cut.Announced {
		why += "; its worker processes' calls reached the harness through pipes, so a cut may hold an answer without the call behind it: no violation stands"
	}
	sound := prefixSound
	if cut.InFlightPrune {
		// A claim again after done is excused by a prune that may have
		// run: one in flight ran by a time the journal never saw.
		sound = slices.DeleteFunc(slices.Clone(sound), func(c string) bool { return c == check.AtMostOnce })
	}
	for i, r := range j.Checkers {
		if r.Verdict == check.Fail && (cut.Announced || !slices.Contains(sound, r.Checker)) {
			j.Checkers[i] = check.Result{Checker: r.Checker, Verdict: check.Unknown, Judged: r.Judged,
				Detail: "cut short: " + r.Detail + " (what a run cut short was doing, its faults in progress and its final probes, is unknown: not a violation)"}
		}
	}
	j.Verdict, j.Violations = check.Overall(j.Checkers)
	if j.Verdict == check.Pass {
		j.Verdict = check.Unknown
	}
	j.Why = why
	return j
}

// lastTime is the latest time a history recorded (0 for none), read part
// by part (history.History.EachPart).
// lastRecorded is when the journal's scenarios last recorded anything,
// by the wall clock: the latest of each one's history origin (its start
// note's) and last recorded time. Zero when no start note has an origin.
// The journal file's time had served, and a run copied without its
// times (cp -r, a CI artifact) said 558 s of a run of 18.
func lastRecorded(jr *history.JournalRead) time.Time {
	var end time.Time
	for _, s := range jr.Scenarios {
		var start journalStart
		if json.Unmarshal(s.Notes[noteStart], &start) != nil || start.Started.IsZero() {
			continue
		}
		if t := start.Started.Add(time.Duration(lastTime(s.Hist))); t.After(end) {
			end = t
		}
	}
	return end
}

func lastTime(h *history.History) int64 {
	var t int64
	_ = h.EachPart(func(p *history.History) error {
		for _, op := range p.Ops() {
			t = max(t, op.Call)
			if op.Return != history.Never {
				t = max(t, op.Return)
			}
		}
		return nil
	})
	return t
}

// CreateJournal starts the journal of a run whose results go to dir
// (JournalFile there; Options.Journal): held by this process while it
// lives (history.CreateJournal), removed once the run's files are
// written.
func CreateJournal(dir string) (*history.Journal, error) {
	return history.CreateJournal(filepath.Join(dir, JournalFile))
}

// EndJournal ends a run's journal (CreateJournal): closed, and removed
// when the run's files are written (written, they are the record). The
// error is why the journal stopped writing, if it did: the run stands,
// but had it crashed it would have been lost.
func EndJournal(j *history.Journal, dir string, written bool) error {
	err := j.Close()
	if written {
		os.Remove(filepath.Join(dir, JournalFile))
	}
	return err
}
