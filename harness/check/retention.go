package check

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// checkRetention reads the leak probes: each key was past its retention,
// and pruned, when the probe asked for it with a fingerprint nobody used;
// the answer must be a fresh claim (the key is gone). Any other answer
// means the store kept the key past its retention: a leak, which grows the
// store forever and keeps a reused key from ever being new. The contract
// allows a store to keep a key longer (retention is a minimum), so a leak
// is a finding (the verdict passes, the detail counts it) unless
// StrictRetention asks for it to fail. Whether it is one is decided once,
// on the whole run (retentionTally.decide).
func checkRetention(e Evidence, ops []history.Op) retentionTally {
	var t retentionTally
	if e.LeakProbe == nil {
		return t
	}
	born := map[stores.KeyRef]int64{} // each key's first claim, for a store whose clock counts in steps
	if e.Model.Semantics.ClockStep > 0 {
		for _, op := range ops {
			if op.Input.Kind == models.Begin && op.Output.Decided() && op.Output.Decision.Outcome == stores.Claimed {
				if at, ok := born[op.Input.Key]; !ok || op.Call < at {
					born[op.Input.Key] = op.Call
				}
			}
		}
	}
	pruned := prunedBefore(ops)
	probed := map[stores.KeyRef]int64{} // each key's first leak probe
	for _, op := range ops {
		if at, ok := probed[op.Input.Key]; op.Client == *e.LeakProbe && (!ok || op.Call < at) {
			probed[op.Input.Key] = op.Call
		}
	}
	last := map[stores.KeyRef]int64{} // each key's last answer before its probe (a call of unknown outcome: its call)
	for _, op := range ops {
		end := op.Return
		if op.Output.Unknown {
			end = op.Call
		}
		if at, ok := probed[op.Input.Key]; ok && op.Input.Kind != models.Prune && op.Client != *e.LeakProbe && end < at && end > last[op.Input.Key] {
			last[op.Input.Key] = end
		}
	}
	for _, op := range ops {
		if op.Client != *e.LeakProbe || op.Input.Kind != models.Begin || !op.Output.Decided() {
			continue
		}
		if at, ok := born[op.Input.Key]; ok && time.Duration(op.Call-at) < e.Model.LatestEnd(e.Model.Retention) {
			continue // a store whose clock counts in steps may keep it a step longer, rounded up (models.Config.LatestEnd)
		}
		if pruned(op.Call) < last[op.Input.Key]+int64(e.Model.Retention) {
			t.unpruned++ // no Prune is known to have run past its retention: its answer shows no leak
			continue
		}
		t.probes++
		if d := op.Output.Decision; d.Outcome != stores.Claimed || d.Takeover {
			what := d.Outcome.String()
			if d.Takeover {
				what = "a takeover of a claim still there"
			}
			t.leak(e, Violation{Retention, op.Input.Key.String(), fmt.Sprintf(
				"%s was still there past its retention (%v) and a prune: a new request got %s", op.Input.Key, e.Model.Retention, what)})
		}
	}
	return t
}

// prunedBefore answers, for a moment, the latest call of a Prune that
// returned before it with the store's answer: a Prune that failed (a full
// disk, a lost connection) or was declared not applied may have pruned
// nothing, and a key it left is no leak. math.MinInt64 when none did.
func prunedBefore(ops []history.Op) func(at int64) int64 {
	type done struct{ ret, call int64 }
	var ps []done
	for _, op := range ops {
		if op.Input.Kind == models.Prune && op.Output.Decided() {
			ps = append(ps, done{op.Return, op.Call})
		}
	}
	slices.SortFunc(ps, func(a, b done) int { return cmp.Compare(a.ret, b.ret) })
	for i := 1; i < len(ps); i++ {
		ps[i].call = max(ps[i].call, ps[i-1].call) // the latest call so far
	}
	return func(at int64) int64 {
		i, _ := slices.BinarySearchFunc(ps, at, func(p done, at int64) int { return cmp.Compare(p.ret, at) })
		if i == 0 {
			return math.MinInt64
		}
		return ps[i-1].call
	}
}

// retentionTally is what checkRetention found in a part, or in the parts
// merged so far: the keys probed, the leaks, the leak of the first key
// (by key, as the violations are sorted) for a finding to name, and,
// under StrictRetention only, every leak, for the result to list: a
// finding lists none, so a run that leaks every key keeps no more than
// its count.
type retentionTally struct {
	probes, leaks int
	// unpruned counts the probes not judged: no Prune that answered ran
	// once their key was past its retention.
	unpruned int
	first    Violation
	vs       []Violation
}

// leak counts v, a leak found in a part.
func (t *retentionTally) leak(e Evidence, v Violation) {
	t.leaks++
	if t.leaks == 1 || v.Key < t.first.Key {
		t.first = v
	}
	if e.StrictRetention {
		t.vs = append(t.vs, v)
	}
}

// add merges o, the next part's tally, into t.
func (t *retentionTally) add(o retentionTally) {
	if o.leaks > 0 && (t.leaks == 0 || o.first.Key < t.first.Key) {
		t.first = o.first
	}
	t.probes += o.probes
	t.unpruned += o.unpruned
	t.leaks += o.leaks
	t.vs = append(t.vs, o.vs...)
}

// decide is the [Retention] result of a run's merged tally: a leak is a
// finding, or under StrictRetention a violation.
func (t retentionTally) decide(e Evidence) Result {
	if e.LeakProbe == nil {
		return Result{Checker: Retention, Verdict: Pass, Detail: "no leak probe in this scenario"}
	}
	unpruned := ""
	if t.unpruned > 0 {
		unpruned = fmt.Sprintf("; %d leak probe(s) not judged: no Prune answered once their key was past its retention (one that failed, a full disk or a lost connection, may have pruned nothing)", t.unpruned)
	}
	if t.leaks > 0 && !e.StrictRetention {
		return Result{Checker: Retention, Verdict: Pass, Judged: t.probes, Detail: findingPrefix + fmt.Sprintf(
			"%d of %d keys kept past their retention (a leak; strict retention makes it a failure); first: %s%s", t.leaks, t.probes, t.first.Detail, unpruned)}
	}
	if t.probes == 0 && t.unpruned > 0 {
		return Result{Checker: Retention, Verdict: Pass, Detail: "no key probed past its retention" + unpruned}
	}
	sortViolations(t.vs)
	return judged(result(Retention, t.vs, fmt.Sprintf("%d keys probed past their retention, all gone%s", t.probes, unpruned)), t.probes)
}
