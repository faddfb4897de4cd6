package check

import (
	"fmt"

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
// StrictRetention asks for it to fail.
func checkRetention(e Evidence, ops []history.Op) Result {
	if e.LeakProbe == nil {
		return Result{Checker: Retention, Verdict: Pass, Detail: "no leak probe in this scenario"}
	}
	var vs []Violation
	probes := 0
	for _, op := range ops {
		if op.Client != *e.LeakProbe || op.Input.Kind != models.Begin || !op.Output.Decided() {
			continue
		}
		probes++
		if d := op.Output.Decision; d.Outcome != stores.Claimed || d.Takeover {
			what := d.Outcome.String()
			if d.Takeover {
				what = "a takeover of a claim still there"
			}
			vs = append(vs, Violation{Retention, op.Input.Key.String(), fmt.Sprintf(
				"%s was still there past its retention (%v) and a prune: a new request got %s", op.Input.Key, e.Model.Retention, what)})
		}
	}
	sortViolations(vs)
	if len(vs) > 0 && !e.StrictRetention {
		return Result{Checker: Retention, Verdict: Pass, Judged: probes, Detail: findingPrefix + fmt.Sprintf(
			"%d of %d keys kept past their retention (a leak; strict retention makes it a failure); first: %s", len(vs), probes, vs[0].Detail)}
	}
	return judged(result(Retention, vs, fmt.Sprintf("%d keys probed past their retention, all gone", probes)), probes)
}
