package harness

import (
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// LeaseSaid returns a lease that a claim of r's store said it had
// (stores.Decision.LeaseUntil less its DecidedAt) where it is not the
// lease the run gave it (r's LockTTL, or the request's own lease), and
// true; false when no claim said one, or every one said the run's. A
// store that keeps a lease of its own, whatever stores.Config.LockTTL
// asks, is judged by a lease it does not keep: this is how a failure can
// say so plainly. A difference within a tenth of the run's lease (a
// store that rounds, or reads its clock twice) does not count.
func LeaseSaid(r *results.ScenarioResult) (time.Duration, bool) {
	h := r.History()
	if h == nil || r.LockTTL <= 0 {
		return 0, false
	}
	var said time.Duration
	found := h.Has(func(op history.Op) bool {
		if op.Input.Kind != models.Begin || !op.Output.Decided() {
			return false
		}
		d := op.Output.Decision
		if d.Outcome != stores.Claimed || d.LeaseUntil.IsZero() {
			return false
		}
		gave := time.Duration(r.LockTTL)
		if op.Input.Lease > 0 {
			gave = op.Input.Lease
		}
		said = d.LeaseUntil.Sub(d.DecidedAt)
		diff := said - gave
		return diff > gave/10 || -diff > gave/10
	})
	return said, found
}
