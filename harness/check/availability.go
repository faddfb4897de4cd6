package check

import (
	"fmt"
	"math"
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
// not an error, when no fault was injected during it. An error there,
// declared not applied (stores.ErrNotApplied) or not, is counted;
// past [AvailabilityTolerance] of such Begins, and past what the store
// erred at anyway at the same times (availabilityTally.allowed), it is a
// finding. It fails a run only when asked (Evidence.StrictAvailability):
// the store kept every promise of safety (the other checkers judge
// those), and a correct store on a loaded machine may time out; what it
// reports is a cost, to be seen.
//
// Contention is told from the machine by the Begins that met no live
// claim, called in the same [AvailabilityWindow]:
//   - Where one of them got an error of unknown outcome (a timeout, a
//     lost connection: the machine or the network could not keep up),
//     the errors of unknown outcome of the Begins owed a 409 are not
//     counted: under such load a Begin that queued behind its key's other
//     callers (a row lock held for a moment, not for a client's work)
//     outlives its deadline before a lone one does, and its error says
//     the machine was slow, not that the store chose an error over a 409.
//     A store that makes contention wait for a claim's work (a lock held
//     across it) still shows, on a machine that keeps up.
//   - The errors that remain are weighed against the share of those
//     Begins that erred (a server refusing sessions at its connection
//     limit refuses them whether or not a claim is live).
//
// A part counts its Begins window by window (the faults, every one of
// them, are in every part); the counts are judged once, for the whole
// run (availabilityTally.decide): judged part by part, a rate could pass
// the tolerance in one small part and fail a correct store in strict
// mode.
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
			if faultDuring(faults, b.Call, end) {
				continue
			}
			w := t.window(b.Call)
			if !metLiveClaim(e.Model, kops, b, end) {
				w.calm++
				if !b.Output.Decided() {
					w.calmErred++
				}
				if b.Output.Unknown {
					w.calmUnknown++
				}
				continue
			}
			w.due++
			if b.Output.Decided() {
				continue
			}
			w.erred++
			if b.Output.Unknown {
				w.unknown++
				w.firstUnknown.take(k, b)
			} else {
				w.firstDeclared.take(k, b)
			}
		}
	}
	return t
}

// availabilityTally is what checkAvailability found in a part, or in the
// parts merged so far: its counts by [AvailabilityWindow] of the Begins'
// call times.
type availabilityTally struct {
	windows map[int64]*availabilityWindow
}

// AvailabilityWindow is the span of call times over which [Availability]
// compares the Begins owed a 409 with those that met no live claim: the
// load on a store (a burst of retries after a fault, a loaded machine's
// stalls) changes over a run, and an error is weighed against what other
// Begins of about the same time met, not against the whole run's.
const AvailabilityWindow = time.Second

// availabilityWindow counts the Begins called in one [AvailabilityWindow]
// of a run: those owed a 409 (due), those of them that erred, and those
// errors of unknown outcome (the rest were declared not applied); those
// that met no live claim of their parameters (calm: judged the same way,
// with no fault near), those of them that erred, and those errors of
// unknown outcome; and the first error of each kind of a Begin owed a
// 409.
type availabilityWindow struct {
	due, erred, unknown          int
	calm, calmErred, calmUnknown int
	firstUnknown, firstDeclared  firstErr
}

// firstErr is the first error of a key by name in a window, as the other
// checkers name their first violation, whatever part it is in.
type firstErr struct{ key, text string }

// take keeps b's error if its key comes before f's.
func (f *firstErr) take(k stores.KeyRef, b history.Op) {
	if key := k.String(); f.text == "" || key < f.key {
		*f = firstErr{key, fmt.Sprintf("client %d's Begin of %s at %s: %s", b.Client, k, ms(b.Call), b.Err)}
	}
}

// merge keeps o if it comes before f.
func (f *firstErr) merge(o firstErr) {
	if o.text != "" && (f.text == "" || o.key < f.key) {
		*f = o
	}
}

// window is the counts of the window call falls in.
func (t *availabilityTally) window(call int64) *availabilityWindow {
	return t.at(call / int64(AvailabilityWindow))
}

// at is the counts of window i.
func (t *availabilityTally) at(i int64) *availabilityWindow {
	if t.windows == nil {
		t.windows = map[int64]*availabilityWindow{}
	}
	w := t.windows[i]
	if w == nil {
		w = &availabilityWindow{}
		t.windows[i] = w
	}
	return w
}

// add merges o, the next part's tally, into t.
func (t *availabilityTally) add(o availabilityTally) {
	for i, ow := range o.windows {
		w := t.at(i)
		w.due += ow.due
		w.erred += ow.erred
		w.unknown += ow.unknown
		w.calm += ow.calm
		w.calmErred += ow.calmErred
		w.calmUnknown += ow.calmUnknown
		w.firstUnknown.merge(ow.firstUnknown)
		w.firstDeclared.merge(ow.firstDeclared)
	}
}

// availabilityMargin is how many standard deviations of chance the
// errors of the Begins owed a 409 must stand above the store's calm
// error rate (availabilityCounts.allowed) before they are contention's.
// Three: a correct store's run is judged by every scenario on every seed
// (soaks, mutate's baseline), and one false failure in a few hundred
// runs would be one too many; a store that answers contention with
// errors by design stands tens of deviations above.
const availabilityMargin = 3

// availabilityCounts is a run's tally summed over its windows, the
// errors of unknown outcome of a window where a calm Begin got one too
// left out (excused): what decide judges.
type availabilityCounts struct {
	due, erred, declared, excused int
	calm, calmErred               int
	// expect and variance are the errors the Begins owed a 409 would get
	// at the calm Begins' rate of their windows, and the variance of the
	// difference from it (see allowed).
	expect, variance float64
	first, firstKey  string
}

// counts sums t's windows (see availabilityCounts).
func (t availabilityTally) counts() availabilityCounts {
	var c availabilityCounts
	var first firstErr
	for _, w := range t.windows {
		due, erred := w.due, w.erred
		if w.calmUnknown > 0 {
			due, erred = due-w.unknown, erred-w.unknown
			c.excused += w.unknown
		} else {
			first.merge(w.firstUnknown)
		}
		first.merge(w.firstDeclared)
		c.due += due
		c.erred += erred
		c.declared += w.erred - w.unknown
		c.calm += w.calm
		c.calmErred += w.calmErred
		if due == 0 || w.calmErred == 0 {
			continue
		}
		d, n := float64(due), float64(w.calm)
		p := float64(w.calmErred) / n
		c.expect += d * p
		c.variance += d * p * (1 - p) * (1 + d/n)
	}
	c.first, c.firstKey = first.text, first.key
	return c
}

// allowed is how many of the Begins owed a 409 may get an error before
// [Availability] calls it contention's cost: in each window, the share at
// which the Begins that met no live claim erred (any error that comes
// whether or not a claim is live), plus [AvailabilityTolerance] of them
// all, plus availabilityMargin deviations of the difference, both rates
// being counted from a sample. With no error away from contention it is
// the tolerance alone.
func (c availabilityCounts) allowed() float64 {
	return c.expect + float64(c.due)*AvailabilityTolerance + availabilityMargin*math.Sqrt(c.variance)
}

// decide is the [Availability] result of a run's merged tally: its error
// rate against [AvailabilityTolerance] and the store's own error rate
// at the same times away from contention (availabilityCounts.allowed),
// once for the whole run.
func (t availabilityTally) decide(e Evidence) Result {
	c := t.counts()
	excused := ""
	if c.excused > 0 {
		excused = fmt.Sprintf("%d Begins that met a live claim got an error of unknown outcome (a timeout, a lost connection) at a time when Begins that met none did too: the machine's or the network's, not counted", c.excused)
	}
	if c.due == 0 && c.excused > 0 {
		return Result{Checker: Availability, Verdict: Pass, Detail: "no Begin that met a live claim of its parameters was judged: " + excused}
	}
	if c.due == 0 {
		return Result{Checker: Availability, Verdict: Pass, Detail: "no Begin met a live claim of its parameters"}
	}
	if excused != "" {
		excused = "; " + excused
	}
	rate := float64(c.erred) / float64(c.due)
	calm := ""
	if c.calmErred > 0 {
		calm = fmt.Sprintf("; %d of %d Begins that met no live claim erred too (%.1f%%)", c.calmErred, c.calm, 100*float64(c.calmErred)/float64(c.calm))
	}
	if float64(c.erred) <= c.allowed() {
		detail := fmt.Sprintf("%d Begins met a live claim of their parameters (409 due), %d got an error (%.1f%%, within the %.0f%% tolerance)%s",
			c.due, c.erred, 100*rate, 100*AvailabilityTolerance, excused)
		if rate > AvailabilityTolerance {
			detail = fmt.Sprintf("%d Begins met a live claim of their parameters (409 due), %d got an error (%.1f%%)%s: no more than chance allows at the rate the store, or the machine under it, erred at the same times away from contention, so not contention's cost%s",
				c.due, c.erred, 100*rate, calm, excused)
		}
		return Result{Checker: Availability, Verdict: Pass, Judged: c.due, Detail: detail}
	}
	detail := fmt.Sprintf("%d of %d Begins that met a live claim of their parameters got an error instead of 409 (%.1f%%, past the %.0f%% tolerance; %d declared not applied, %d of unknown outcome%s%s): the store is unavailable under contention; first: %s",
		c.erred, c.due, 100*rate, 100*AvailabilityTolerance, c.declared, c.erred-c.declared, calm, excused, c.first)
	if e.StrictAvailability {
		detail += " (strict availability makes it a failure)"
		return Result{Checker: Availability, Verdict: Fail, Detail: detail, Judged: c.due,
			Violations: []Violation{{Availability, c.firstKey, detail}}}
	}
	detail = findingPrefix + detail
	return Result{Checker: Availability, Verdict: Pass, Detail: detail, Judged: c.due}
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

// faultDuring reports whether an injected fault (any, anywhere: a paused
// server or a cut network hits every client) overlapped [call, end]; a
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
