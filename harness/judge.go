package harness

import (
	"context"
	"errors"
	"iter"
	"slices"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// Judged is a finished scenario's verdict, and what it was judged by.
type Judged struct {
	// Record is what the scenario recorded besides its history.
	Record scenario.Record
	// Params are what the checkers judged the history by: with the
	// history, enough to judge it again (Judge).
	Params check.Params
	// Checkers are every checker's result; Violations all their
	// violations; Verdict the fold of theirs (check.Overall), or Skipped
	// when the scenario skipped itself.
	Checkers   []check.Result
	Violations []check.Violation
	Verdict    check.Verdict
	// Why says why the verdict is undecided when no checker said so
	// itself (check.NothingJudged); "" otherwise.
	Why string
	// Notes say what the history shows beside the verdicts: decisions
	// timed far from their calls (decidedAtNote).
	Notes []string
	// Interrupted: an interrupt cut the scenario short and its verdicts
	// were made undecided where a cut can fake them (cutShort); a
	// recheck judges it so again.
	Interrupted bool
}

// Finish ends a scenario run whose clients are done: the one tail every
// run ends with, whether the runner's scenario, a hunt's episode or
// round, a replay or a demo. It probes every key once the clock is past
// LockTTL (when probe is set), stops the stall watch (stopWatch, from
// history.WatchStalls), and judges the history with the store's
// declarations (Options.Declared). keep keeps what a page of the history
// needs (check.Result.Linearization). A scenario that skipped itself is not probed nor judged:
// its verdict is Skipped.
func (o Options) Finish(ctx context.Context, env *scenario.Env, stopWatch func(), probe, keep bool) Judged {
	if rec := env.Record(); rec.Skipped != "" {
		stopWatch()
		return Judged{Record: rec, Verdict: check.Skipped, Checkers: []check.Result{}, Violations: []check.Violation{}}
	}
	probeID := env.NewClientID()
	if probe {
		// A run that dies while it probes is judged by these (Recover),
		// the keys the probe leaves out among them.
		env.PlanProbe()
		before := len(env.Unprobed())
		env.Hist.Note(noteParams, o.params(env, probeID))
		env.ProbeAfterLockTTL(ctx, probeID)
		if len(env.Unprobed()) != before {
			env.Hist.Note(noteParams, o.params(env, probeID))
		}
	}
	stopWatch()
	_, fence := o.Declared()
	rec := env.Record()
	j := Judge(ctx, o.params(env, probeID), env.Hist, env.Ledger, fence, keep)
	j.Record = rec
	if ctx.Err() != nil {
		j.cutShort()
	}
	return j
}

// params are what env's history is judged by, with probeID the client
// of its final probes.
func (o Options) params(env *scenario.Env, probeID int) check.Params {
	sem, _ := o.Declared()
	m := check.ModelFor(o.Backend.Clock, env.Config, sem)
	var unprobed []string
	for _, k := range env.Unprobed() {
		unprobed = append(unprobed, k.String())
	}
	return check.Params{LockTTL: m.LockTTL, Retention: m.Retention, Slack: m.Slack, ProbeClient: probeID, Unprobed: unprobed,
		LeakProbe: env.Record().LeakProbe, StrictRetention: o.StrictRetention, StrictAvailability: o.StrictAvailability, Semantics: sem, Clock: m.Clock}
}

// cutShort makes undecided what an interrupt cut short: the interrupt
// cancels the workload's calls and the final probes, and a call the run
// itself cancelled is no evidence of the store. Only the checkers whose
// violations a cut cannot fake keep theirs (prefixSound, as for a run
// recovered from its journal); the others' failures are unknown. Before,
// only the probes' checkers were: a Ctrl-C during the final probes of a
// correct Postgres store's network scenario failed liveness ("got no
// answer … context canceled") in 2 of 5 tries, and one during a correct
// store's crash scenario failed --strict-availability ("8 of 8 Begins …
// got an error instead of 409 … context canceled").
//
// A finding of such a checker (check.Result.Finding) stays one, saying
// that the interrupt may have made it: an interrupted run's availability
// finding blamed the store for calls the run had cancelled itself.
func (j *Judged) cutShort() {
	j.Interrupted = true
	for i, r := range j.Checkers {
		switch {
		case slices.Contains(prefixSound, r.Checker):
		case r.Verdict == check.Fail:
			j.Checkers[i] = check.Result{Checker: r.Checker, Verdict: check.Unknown, Judged: r.Judged,
				Detail: "interrupted: the workload's calls and the final probes were cancelled, so what this checker reads is unknown (it had found: " + r.Detail + ")"}
		case r.Finding() != "":
			j.Checkers[i].Detail += " (the run was interrupted and cancelled its own calls: this may be the interrupt's doing, not the store's)"
		}
	}
	j.Verdict, j.Violations = check.Overall(j.Checkers)
}

// Judge runs every checker on a history by the params it is judged by,
// and folds their verdicts: the one place the checkers are called, for a
// run that just finished (Finish) and for a saved one (Recheck). fence
// is the store's declared fence (nil: none); keep keeps what a page of the
// history needs. Once ctx is done (an interrupt) the checkers stop what
// can take long and answer unknown for it (check.Evidence.Done).
//
// A spilled history (history.History.SpillTo) is judged part by part
// (check.RunParts), each part with the charges of its keys' orders: memory
// then holds one part at once. A part that cannot be read back makes the
// verdict undecided, the error said.
func Judge(ctx context.Context, p check.Params, hist *history.History, ledger *history.Ledger, fence stores.Fence, keep bool) Judged {
	e := check.Evidence{Model: p.Model(), ProbeClient: p.ProbeClient, Unprobed: keySet(p.Unprobed),
		LeakProbe: p.LeakProbe, StrictRetention: p.StrictRetention, StrictAvailability: p.StrictAvailability, Fence: fence, LinTimeout: LinTimeout, Keep: keep, Done: ctx.Done(), FencesGiven: hist.FencesGiven()}
	parts, readErr := evidenceParts(hist, ledger)
	res := check.RunParts(e, parts)
	v, vs := check.Overall(res)
	j := Judged{Params: p, Checkers: res, Violations: vs, Verdict: v}
	if n := decidedAtNote(hist); n != "" {
		j.Notes = append(j.Notes, n)
	}
	if v == check.Unknown && !slices.ContainsFunc(res, func(r check.Result) bool { return r.Verdict == check.Unknown }) {
		j.Why = check.NothingJudged
	}
	if err := *readErr; err != nil {
		if j.Verdict == check.Pass {
			j.Verdict = check.Unknown
		}
		j.Why = "the history could not be read back whole: " + err.Error()
	}
	return j
}

// evidenceParts gives hist and ledger to the checkers in parts
// (history.History.EachPart): each part with the charges of the orders
// its work runs and answers name, and the last with every charge no part
// named, so that each charge is judged once. *err says afterwards why the
// parts stopped short, if they did.
func evidenceParts(hist *history.History, ledger *history.Ledger) (iter.Seq[check.Part], *error) {
	var err error
	if !hist.Spilled() {
		return func(yield func(check.Part) bool) { yield(check.Part{Hist: hist, Ledger: ledger}) }, &err
	}
	charges := ledger.Charges()
	used := make([]bool, len(charges))
	byOrder := map[string][]int{}
	for i, c := range charges {
		byOrder[c.Order] = append(byOrder[c.Order], i)
	}
	return func(yield func(check.Part) bool) {
		n := 0
		err = hist.EachPart(func(p *history.History) error {
			n++
			mine := map[int]bool{}
			for _, w := range p.Work() {
				for _, i := range byOrder[w.Order] {
					mine[i] = true
				}
			}
			for _, a := range p.Answers() {
				for _, i := range byOrder[a.Order] {
					mine[i] = true
				}
			}
			var cs []history.Charge
			for i, c := range charges {
				if !used[i] && (mine[i] || n == history.SpillParts) {
					used[i] = true
					cs = append(cs, c)
				}
			}
			if !yield(check.Part{Hist: p, Ledger: history.LedgerOf(cs)}) {
				return errStopped
			}
			return nil
		})
		if errors.Is(err, errStopped) {
			err = nil
		}
	}, &err
}

// errStopped ends EachPart when the checkers stop asking for parts.
var errStopped = errors.New("stopped")

// LockTTLFor is the LockTTL of sc's store, decided here alone: the run's
// LockTTL, or for a scheduled scenario on a server-clock store
// ScheduledLockTTL when that is positive and shorter (a tick of the
// scheduler waits LockTTL out in real time there).
func (o Options) LockTTLFor(sc scenario.Scenario) time.Duration {
	if sc.Scheduled && o.Backend.Clock == stores.ServerClock && o.ScheduledLockTTL > 0 {
		return min(o.LockTTL, o.ScheduledLockTTL)
	}
	return o.LockTTL
}

// keySet is the set of keys, nil for none.
func keySet(keys []string) map[string]bool {
	if len(keys) == 0 {
		return nil
	}
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}
