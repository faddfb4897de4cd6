package check

import (
	"fmt"
	"slices"

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
// made: a key whose row a leaked transaction locks times out beside keys
// that answer. Otherwise the store was answering no one, or a trickle
// (its server starved by the machine, or cut off by a network), which
// says nothing of the key: it is not judged, the verdict is undecided and
// names it. A Redis soak beside a test suite and two CPU hogs, at load
// 95, had every probe of 80 keys of skew end in "i/o timeout" so, while
// 1 to 6 calls of other keys were answered beside each. A key's
// probes are in its part, and the calls answered meanwhile are the
// part's: in a history spilled into parts, a key may find fewer.
func checkLiveness(e Evidence, ops []history.Op) livenessTally {
	var t livenessTally
	probed := map[stores.KeyRef]*keyProbes{}
	var keys []stores.KeyRef
	for _, op := range ops {
		if op.Client != e.ProbeClient || op.Input.Kind != models.Begin || e.Unprobed[op.Input.Key.String()] {
			continue
		}
		k := op.Input.Key
		p := probed[k]
		if p == nil {
			p = &keyProbes{}
			probed[k] = p
			keys = append(keys, k)
		}
		p.last = op // ops are in call order
		p.tries++
		p.silence.Add(op.Output.Decided(), op.Call)
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
		case op.Output.Decision.Outcome == stores.InFlight:
			t.vs = append(t.vs, Violation{Liveness, op.Input.Key.String(), fmt.Sprintf(
				"%s is still in flight at the final probe, though every client stopped and every claim ended or its LockTTL (%v) passed: stuck",
				op.Input.Key, e.Model.LockTTL)})
		}
	}
	return t
}

// keyProbes is what the final probes of one key came to: the last, how
// many, and the unanswered ones since its last answer.
type keyProbes struct {
	last    history.Op
	tries   int
	silence history.Silence
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
}

// add merges o, the next part's tally, into t.
func (t *livenessTally) add(o livenessTally) {
	t.countTally.add(o.countTally)
	if t.unanswered == 0 {
		t.firstUnanswered = o.firstUnanswered
	}
	t.unanswered += o.unanswered
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
	if t.n == 0 {
		return Result{Checker: Liveness, Verdict: Unknown, Detail: "no final probe ran" + out}
	}
	judgedKeys := t.countTally
	judgedKeys.n -= t.unanswered
	r := judgedKeys.decide(Liveness, "%d keys probed once every claim ended or its LockTTL passed, none stuck")
	switch {
	case r.Verdict == Fail:
		if t.unanswered > 0 {
			r.Detail += fmt.Sprintf("; %d more key(s) not judged, their last final probes unanswered while the store answered few other calls", t.unanswered)
		}
	case t.unanswered > 0:
		r.Verdict = Unknown
		r.Detail += out
	default:
		r.Detail += out
	}
	return r
}
