package check

import (
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// AvailabilityTolerance is the share of the Begins where the decision
// table says 409 that may get an error instead before [Availability]
// calls it a finding: errors now and then (a call that outlived its
// deadline on a loaded machine) are the machine's, and a retry after an
// error costs the client what a retry after a 409 does; a store that
// answers contention with errors by design (a REPEATABLE READ Postgres
// whose race losers get 40001) errs on most such Begins. See
// docs/DESIGN.md §3, "Availability under contention".
const AvailabilityTolerance = 0.01

// AvailabilityPatience is how long a client's pause (a process held at a
// failpoint, perhaps inside its transaction, holding a lock) lasts before
// it excuses other clients' errors: a store owes a wait of that long for a
// lock a live client holds (SQLite's busy timeout, a Postgres row lock)
// before it answers with an error. A server's pause or restart, a kill and
// a network fault excuse at once.
const AvailabilityPatience = time.Second

// checkAvailability judges [Availability]: a Begin that met a live claim
// of the same parameters (see metLiveClaim: the decision table says 409,
// or, had it come before the claim, that it claims) is owed an answer,
// not an error, when no fault was injected during it. An error the store
// answered there, declared not applied (stores.ErrNotApplied) or not, is
// counted; past [AvailabilityTolerance] of such Begins it is a finding.
// It fails a run only when asked (Evidence.StrictAvailability): the
// store kept every promise of safety (the other checkers judge those),
// and what it reports is a cost, to be seen.
//
// An error that came once the call's own deadline had passed
// (history.Op.Deadline: the client gave up waiting), declared not applied
// or not, is counted apart and never makes a finding: it says the call was slow, not that the store
// chose an error over a 409, and on a machine that cannot keep up a Begin
// that queues behind its key's other callers for a moment (a row lock
// held for a statement) outlives its deadline before a lone one does: a
// correct Postgres store failed --strict-availability so, at --parallel
// 32 on 2 cores (docs/performance.md, "Availability on a loaded
// machine").
//
// So is an error a fault injector answered in the store's place when it
// lost the store's answer (history.Op.Lost, stores.ErrLost): a lossy
// link is a fault, as the network scenario's lost replies are (those
// excuse the Begins they overlap), and a correct store behind
// scripts/lossy-exec.py once failed --strict-availability on its lost
// 409s, which soak --random-flags draws.
//
// A part counts its Begins (the faults, every one of them, are in every
// part); the tolerance is applied once, to the whole run's counts
// (availabilityTally.decide): judged part by part, a rate could pass the
// tolerance in one small part and fail a correct store in strict mode.
func checkAvailability(e Evidence, g grouped) availabilityTally {
	faults := e.Hist.Faults()
	var t availabilityTally
	for _, k := range g.order {
		kops := g.keyed[k]
		for _, b := range kops {
			if b.Input.Kind != models.Begin {
				continue
			}
			end := b.Return
			switch {
			case b.Output.Unknown && b.ErrAt > 0:
				end = b.ErrAt
			case b.Output.Unknown: // no error came back (a killed process): not judged
				continue
			}
			if !metLiveClaim(e.Model, kops, b, end) {
				continue
			}
			if faultDuring(faults, b.Call, end) {
				t.excused++
				continue
			}
			t.due++
			switch {
			case b.Output.Decided():
				continue
			case b.Deadline: // an unknown outcome's or a declared no-op's
				t.timedOut++
				continue
			case time.Duration(end-b.Call) >= e.Model.LeaseOf(b.Input.Lease):
				// The store's own wait (a lock's busy timeout) gave up
				// after longer than a claim lives: slowness, a machine
				// too loaded to run the lock's holder as much as a store
				// that holds it too long, not a refusal (SQLite's 5 s
				// busy timeout beside a check's other scenarios at
				// --keys 5000 failed the correct store under
				// --strict-availability, and its reproduce line passed).
				t.waited++
				continue
			case b.Lost: // a fault injector's error, in the store's place
				t.lost++
				continue
			}
			t.erred++
			if b.Output.NotApplied {
				t.declared++
			}
			if key := k.String(); t.first == "" || key < t.firstKey {
				t.firstKey = key
				t.first = fmt.Sprintf("client %d's Begin of %s at %s: %s", b.Client, k, ms(b.Call), b.Err)
			}
		}
	}
	return t
}

// availabilityTally is what checkAvailability found in a part, or in the
// parts merged so far: the Begins owed an answer (due), those that got
// an error the store answered (erred) and those of them declared not
// applied, those whose error came past the call's deadline (timedOut),
// and the first answered error, of the first key by name (first, on
// firstKey), as the other checkers name their first violation, whatever
// part it is in.
type availabilityTally struct {
	due, erred, declared, timedOut, lost int
	excused                              int // met a live claim during a fault: not judged
	waited                               int // an error after waiting past a lease: slowness
	first, firstKey                      string
}

// add merges o, the next part's tally, into t.
func (t *availabilityTally) add(o availabilityTally) {
	if o.first != "" && (t.first == "" || o.firstKey < t.firstKey) {
		t.first, t.firstKey = o.first, o.firstKey
	}
	t.due += o.due
	t.erred += o.erred
	t.declared += o.declared
	t.timedOut += o.timedOut
	t.lost += o.lost
	t.excused += o.excused
	t.waited += o.waited
}

// decide is the [Availability] result of a run's merged tally: its rate
// of answered errors against [AvailabilityTolerance], once for the whole
// run.
func (t availabilityTally) decide(e Evidence) Result {
	if t.due == 0 {
		if t.excused > 0 {
			// Said as such: "no Begin met a live claim" was printed
			// beside 205 Begins answered 409 during a pause.
			return Result{Checker: Availability, Verdict: Pass, Detail: fmt.Sprintf(
				"not judged: the %d Begins that met a live claim of their parameters each ran during a fault (one injected: a pause, a crash, a network or server fault; or the harness itself standing still, harness-stall), which excuses an error", t.excused)}
		}
		return Result{Checker: Availability, Verdict: Pass, Detail: "no Begin was answered while a live claim of its parameters held its key (none was owed a 409; a Begin that waited for the claim to be saved was answered after)"}
	}
	timedOut := ""
	if t.timedOut > 0 {
		timedOut = fmt.Sprintf("; %d of them timed out (the call's deadline passed: slowness, the machine's or the store's, not an error the store answered), not counted as errors", t.timedOut)
	}
	if t.lost > 0 {
		timedOut += fmt.Sprintf("; %d of them had their answer lost by a fault injector in front of the store (stores.ErrLost: a fault, not an error the store answered), not counted as errors", t.lost)
	}
	if t.waited > 0 {
		timedOut += fmt.Sprintf("; %d of them got an error only after waiting longer than a claim's lease (the store's own wait, a lock's busy timeout: slowness, the machine's or the store's, not a refusal), not counted as errors", t.waited)
	}
	if t.excused > 0 {
		timedOut += fmt.Sprintf("; %d more ran during a fault (one injected, or the harness itself standing still), which excuses an error: not judged", t.excused)
	}
	rate := float64(t.erred) / float64(t.due)
	if rate <= AvailabilityTolerance {
		return Result{Checker: Availability, Verdict: Pass, Judged: t.due, Detail: fmt.Sprintf(
			"%d Begins met a live claim of their parameters (409 due), %d got an error (%.1f%%, within the %.0f%% tolerance)%s",
			t.due, t.erred, 100*rate, 100*AvailabilityTolerance, timedOut)}
	}
	detail := fmt.Sprintf("%d of %d Begins that met a live claim of their parameters got an error instead of 409 (%.1f%%, past the %.0f%% tolerance; %d declared not applied, %d of unknown outcome%s): the store is unavailable under contention; first: %s",
		t.erred, t.due, 100*rate, 100*AvailabilityTolerance, t.declared, t.erred-t.declared, timedOut, t.first)
	if e.StrictAvailability {
		detail += " (strict availability makes it a failure)"
		return Result{Checker: Availability, Verdict: Fail, Detail: detail, Judged: t.due,
			Violations: []Violation{{Availability, t.firstKey, detail}}}
	}
	detail = findingPrefix + detail
	return Result{Checker: Availability, Verdict: Pass, Detail: detail, Judged: t.due}
}

// metLiveClaim reports whether b, a Begin of kops's key whose answer or
// error came back at end, met a live claim with its parameters: another
// Begin's answered claim, called before end, whose lease lasts past end
// by the history's clock (it began no earlier than the claim's call) and
// past b's request time by the claim's own decision time, and that no
// save or release of its token may have ended before end. The decision
// table then says 409 to b: had b been decided before that claim, b
// would have claimed and the claim, a fresh one, would have been a 409
// (a takeover, of a claim b would have taken over first); either way b
// was owed an answer, not an error.
func metLiveClaim(m models.Config, kops []history.Op, b history.Op, end int64) bool {
	for _, c := range kops {
		if c.Call >= end {
			break // in call order
		}
		if !c.IsClaim() || c.Input.ID == b.Input.ID || c.Input.Fingerprint != b.Input.Fingerprint {
			continue
		}
		live := m.LeaseOf(c.Input.Lease) - m.Slack
		if time.Duration(end-c.Call) >= live || b.Input.Now.Sub(c.Output.Decision.DecidedAt) >= live {
			continue
		}
		if !endedBy(kops, c.Output.Decision.Token, end) {
			return true
		}
	}
	return false
}

// endedBy reports whether a save or release with tok may have taken
// effect before end: one called by then that was not fenced nor declared
// not applied.
func endedBy(kops []history.Op, tok stores.Token, end int64) bool {
	for _, w := range kops {
		if (w.Input.Kind == models.Complete || w.Input.Kind == models.Release) && w.Input.Token == tok &&
			w.Call < end && !w.Output.Fenced && !w.Output.NotApplied {
			return true
		}
	}
	return false
}

// faultDuring reports whether a recorded fault (any, anywhere: a paused
// server or a cut network hits every client; the harness's own stall
// too) overlapped [call, end]; a
// client's pause counts from AvailabilityPatience after its start, and
// not at all if it ended sooner.
func faultDuring(faults []history.Fault, call, end int64) bool {
	for _, f := range faults {
		start := f.Start
		if f.Kind == history.FaultPause && f.Client >= 0 {
			start += int64(AvailabilityPatience)
			if f.End > 0 && f.End < start {
				continue
			}
		}
		if start <= end && max(f.End, start) >= call {
			return true
		}
	}
	return false
}
