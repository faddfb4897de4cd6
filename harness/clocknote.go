package harness

import (
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
)

// farDecision is how far a decision's time (stores.Decision.DecidedAt)
// may be from its request's time (the caller's clock at the call) before
// the run says so: clocks of one machine, or of a server beside it, agree
// far closer, so a decision an hour off is a store that reads or converts
// its clock wrong (a zone taken for UTC, seconds read as milliseconds, a
// timestamp that did not parse and became zero).
const farDecision = time.Hour

// decidedAtNote says, when some Begin's decision time is more than
// farDecision from its request's time, how many and the first: the
// checkers order a store's decisions by that time, so such a store may
// fail them with violations that do not name the cause ("no order allows
// …"), and a pass should say it too.
// "" when every decision's time is near its request's.
func decidedAtNote(hist *history.History) string {
	n, first := 0, ""
	_ = hist.EachPart(func(p *history.History) error {
		for _, op := range p.Ops() {
			if op.Input.Kind != models.Begin || !op.Output.Decided() {
				continue
			}
			at := op.Output.Decision.DecidedAt
			if at.IsZero() || op.Input.Now.IsZero() {
				continue
			}
			if d := at.Sub(op.Input.Now); d > farDecision || d < -farDecision {
				if n++; n == 1 {
					first = fmt.Sprintf("%s's Begin asked at %s was decided at %s", op.Input.Key,
						op.Input.Now.UTC().Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano))
				}
			}
		}
		return nil
	})
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d Begin decision(s) carry a decision time (decided_at) more than %v from their request's time (first: %s): "+
		"the store reads or converts its clock wrong; a checker that orders calls by it may fail with violations that do not name this cause",
		n, farDecision, first)
}
