package check

import (
	"fmt"
	"slices"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// checkLiveness judges each key by its last final probe, sent once every
// client stopped and every claim was completed or released, or else its
// LockTTL passed (scenario.Env.ProbeAfterLockTTL): the probe asks again
// (after LockTTL) when an answer is lost, so only a key whose probe found
// it still in flight, or that the store would not answer while it
// answered others, fails.
//
// A key whose last probes all went unanswered (errors, timeouts) is stuck
// only if the store answered most other calls that ended while they were
// made, so many that its own silence is not to be expected at their rate
// (history.Ends.Beside): a key whose row a leaked transaction locks times out beside keys
// that answer. Otherwise the store was answering no one, or a trickle
// (its server starved by the machine, or cut off by a network), which
// says nothing of the key: it is not judged, the verdict is undecided and
// names it. A Redis soak beside a test suite and two CPU hogs, at load
// 95, had every probe of 80 keys of skew end in "i/o timeout" so, while
// 1 to 6 calls of other keys were answered beside each. A key's
// probes are in its part, and the calls answered meanwhile are the
// part's: in a history spilled into parts, a key may find fewer.
//
// A key answered 409 at its last probe within a lease of a Begin on it
// whose answer was lost (mayHold) is not judged either: that claim, the
// probe's own as often as not, may hold it.
//
// Nor is a key whose last probe the store refused as not applied
// (stores.ErrNotApplied): a refusal changes nothing and says nothing of
// the key, however often the store answered others.
func checkLiveness(e Evidence, ops []history.Op) livenessTally {
	var t livenessTally
	probed := map[stores.KeyRef]*keyProbes{}
	var keys []stores.KeyRef
	lost := map[stores.KeyRef]history.Op{} // each key's latest Begin whose answer was lost, so far
	for _, op := range ops {
		if op.Input.Kind != models.Begin {
			continue
		}
		k := op.Input.Key
		if op.Client == e.ProbeClient && !e.Unprobed[k.String()] {
			p := probed[k]
			if p == nil {
				p = &keyProbes{}
				probed[k] = p
				keys = append(keys, k)
			}
			p.last = op // ops are in call order
			p.lostBefore = lost[k]
			p.tries++
			p.silence.Add(op.Output.Decided(), op.Call)
		}
		if op.Output.Unknown {
			lost[k] = op
		}
	}
	var ends history.Ends
	if slices.ContainsFunc(keys, func(k stores.KeyRef) bool { return probed[k].silence.N > 0 }) {
		ends = callEnds(ops)
	}
	t.n = len(keys)
	for _, k := range keys {
		p := probed[k]
		op := p.last
		switch {
		case op.Output.NotApplied:
			// The store refused the last probe, and said it changed
			// nothing (a serialization failure, no session free): an
			// answer that says nothing of the key. Judged stuck, a
			// correct store refusing half its calls at random failed.
			if t.refused == 0 {
				t.firstRefused = fmt.Sprintf("%s, %d tries, the last: %s", op.Input.Key, p.tries, op.Err)
			}
			t.refused++
		case !op.Output.Decided():
			// The other calls that ended while the key's probes went
			// unanswered, from the first of them to the last one's error:
			// most of them answered, the store was answering.
			ok, failed, answering := ends.Beside(p.silence.From, max(op.ErrAt, op.Call), p.silence.N)
			if answering {
				t.vs = append(t.vs, Violation{Liveness, op.Input.Key.String(), fmt.Sprintf(
					"the final probe of %s got no answer in %d tries (last: %s), while the store answered %d of %d other calls meanwhile",
					op.Input.Key, p.tries, op.Err, ok, ok+failed)})
				continue
			}
			if t.unanswered == 0 {
				t.firstUnanswered = fmt.Sprintf("%s, %d tries, the last: %s", op.Input.Key, p.tries, op.Err)
			}
			t.unanswered++
		case op.Output.Decision.Outcome == stores.InFlight && mayHold(e.Model, p.lostBefore, op):
			// The claim of a Begin whose answer was lost (the probe's
			// own, as often as not) may hold the key: a 409 then is no
			// sign of a stuck key.
			if t.held == 0 {
				t.firstHeld = fmt.Sprintf("%s, answered 409 %v after the lost Begin of client %d", op.Input.Key,
					models.OpTime(op.Input, op.Output).Sub(p.lostBefore.Input.Now).Round(time.Microsecond), p.lostBefore.Client)
			}
			t.held++
		case op.Output.Decision.Outcome == stores.InFlight:
			t.vs = append(t.vs, Violation{Liveness, op.Input.Key.String(), fmt.Sprintf(
				"%s is still in flight at the final probe, though every client stopped and every claim ended or its LockTTL (%v) passed: stuck",
				op.Input.Key, e.Model.LockTTL)})
		}
	}
	return t
}

// keyProbes is what the final probes of one key came to: the last, how
// many, the unanswered ones since its last answer, and the key's latest
// Begin whose answer was lost before the last probe (zero: none).
type keyProbes struct {
	last       history.Op
	tries      int
	silence    history.Silence
	lostBefore history.Op
}

// mayHold reports whether the claim that lost, a Begin whose answer was
// lost (zero: none), may have made can still be live when probe was
// decided: less than its lease (and the model's slack) after lost's
// request time, placed as the model places an unanswered claim
// (models.UnansweredAt). The model lets such a claim answer 409 for as
// long as it likes (its lock time is a lower bound); the probe waits its
// LockTTL out before it asks again, so a key still in flight at a probe
// more than a lease after the last lost Begin is stuck.
func mayHold(m models.Config, lost, probe history.Op) bool {
	if lost.Input.Now.IsZero() {
		return false
	}
	return models.OpTime(probe.Input, probe.Output).Sub(models.UnansweredAt(lost.Input.Now)) < m.LatestEnd(m.LeaseOf(lost.Input.Lease))
}

// callEnds is when each of ops ended: a decided call's return
// (answered), an unanswered one's error, or its call where no error time
// was recorded (unanswered). Only a part with a silent key needs them.
func callEnds(ops []history.Op) history.Ends {
	var answered, unanswered []int64
	for _, op := range ops {
		if op.Output.Decided() {
			answered = append(answered, op.Return)
		} else {
			unanswered = append(unanswered, max(op.ErrAt, op.Call))
		}
	}
	return history.NewEnds(answered, unanswered)
}

// livenessTally is the liveness checker's tally: the keys probed and the
// stuck ones (a [countTally]), and the keys whose last probes went
// unanswered while the store answered few others, which it does not judge.
type livenessTally struct {
	countTally
	unanswered      int
	firstUnanswered string // the first such key, its tries and its last error
	// held counts the keys answered 409 at their last final probe while
	// a lost Begin's claim may still hold them (mayHold): not judged.
	held      int
	firstHeld string
	// refused counts the keys whose last final probe the store refused
	// as not applied (stores.ErrNotApplied): not judged.
	refused      int
	firstRefused string
}

// add merges o, the next part's tally, into t.
func (t *livenessTally) add(o livenessTally) {
	t.countTally.add(o.countTally)
	if t.unanswered == 0 {
		t.firstUnanswered = o.firstUnanswered
	}
	t.unanswered += o.unanswered
	if t.held == 0 {
		t.firstHeld = o.firstHeld
	}
	t.held += o.held
	if t.refused == 0 {
		t.firstRefused = o.firstRefused
	}
	t.refused += o.refused
}

// decide is the [Liveness] result of a run's merged tally, unprobed keys
// left out of the final probe: unknown when no part had a final probe,
// or when no key was stuck and some went unanswered.
func (t livenessTally) decide(unprobed int) Result {
	out := ""
	if unprobed > 0 {
		out = fmt.Sprintf("; %d key(s) not probed: a claim on them may still be held, under a lease longer than the run could wait", unprobed)
	}
	if t.unanswered > 0 {
		out += fmt.Sprintf("; %d key(s) not judged, their last final probes unanswered while the store answered few other calls (first %s): whether they are stuck is not known", t.unanswered, t.firstUnanswered)
	}
	if t.held > 0 {
		out += fmt.Sprintf("; %d key(s) not judged, answered 409 at their last final probe within a lease of a Begin on them whose answer was lost, whose claim may hold them (first %s): whether they are stuck is not known", t.held, t.firstHeld)
	}
	if t.refused > 0 {
		out += fmt.Sprintf("; %d key(s) not judged, the store refused their last final probe as not applied (first %s): a refusal changes nothing and says nothing of whether they are stuck", t.refused, t.firstRefused)
	}
	if t.n == 0 {
		return Result{Checker: Liveness, Verdict: Unknown, Detail: "no final probe ran" + out}
	}
	notJudged := t.unanswered + t.held + t.refused
	judgedKeys := t.countTally
	judgedKeys.n -= notJudged
	r := judgedKeys.decide(Liveness, "%d keys probed once every claim ended or its LockTTL passed, none stuck")
	switch {
	case r.Verdict == Fail:
		if notJudged > 0 {
			r.Detail += fmt.Sprintf("; %d more key(s) not judged (their last final probes unanswered or refused, or answered 409 while a lost Begin's claim may hold them)", notJudged)
		}
	case notJudged > 0:
		r.Verdict = Unknown
		r.Detail += out
	default:
		r.Detail += out
	}
	return r
}
