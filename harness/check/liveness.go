package check

import (
	"fmt"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// checkLiveness judges each key by its last final probe, sent once every
// client stopped and every claim was completed or released, or else its
// LockTTL passed (scenario.Env.ProbeAfterLockTTL): the probe asks again
// (after LockTTL) when an answer is lost, so only a key whose every probe
// went unanswered, or whose probe found it still in flight, fails.
// A key's probes are in its part.
func checkLiveness(e Evidence, ops []history.Op) countTally {
	var vs []Violation
	last := map[stores.KeyRef]history.Op{}
	tries := map[stores.KeyRef]int{}
	var keys []stores.KeyRef
	for _, op := range ops {
		if op.Client != e.ProbeClient || op.Input.Kind != models.Begin || e.Unprobed[op.Input.Key.String()] {
			continue
		}
		k := op.Input.Key
		if _, ok := last[k]; !ok {
			keys = append(keys, k)
		}
		last[k] = op // ops are in call order
		tries[k]++
	}
	probes := len(keys)
	for _, k := range keys {
		op := last[k]
		switch {
		case !op.Output.Decided():
			vs = append(vs, Violation{Liveness, op.Input.Key.String(), fmt.Sprintf(
				"the final probe of %s got no answer in %d tries (last: %s)", op.Input.Key, tries[k], op.Err)})
		case op.Output.Decision.Outcome == stores.InFlight:
			vs = append(vs, Violation{Liveness, op.Input.Key.String(), fmt.Sprintf(
				"%s is still in flight at the final probe, though every client stopped and every claim ended or its LockTTL (%v) passed: stuck",
				op.Input.Key, e.Model.LockTTL)})
		}
	}
	return countTally{n: probes, vs: vs}
}

// decideLiveness is the [Liveness] result of a run's merged tally (the
// keys probed), unprobed keys left out of the final probe: unknown when
// no part had a final probe.
func decideLiveness(t countTally, unprobed int) Result {
	out := ""
	if unprobed > 0 {
		out = fmt.Sprintf("; %d key(s) not probed: a claim on them may still be held, under a lease longer than the run could wait", unprobed)
	}
	if t.n == 0 {
		return Result{Checker: Liveness, Verdict: Unknown, Detail: "no final probe ran" + out}
	}
	r := t.decide(Liveness, "%d keys probed once every claim ended or its LockTTL passed, none stuck")
	if r.Verdict == Pass {
		r.Detail += out
	}
	return r
}
