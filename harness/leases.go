package harness

import (
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// LeaseSaid returns the lease that the claims of r's store said they had
// (stores.Decision.LeaseUntil less its DecidedAt) where it is not the
// lease the run gave them (r's LockTTL, or the request's own lease), and
// true; false when no claim said one, or every one said the run's. A
// store that keeps a lease of its own, whatever stores.Config.LockTTL
// asks, is judged by a lease it does not keep: this is how a failure can
// say so plainly. A difference within a tenth of the run's lease (a
// store that rounds, or reads its clock twice) does not count.
//
// spread is set, and ok false, when the claims that said a lease other
// than the run's said no one lease: their smallest and largest differ by
// more than a tenth of the largest (a DecidedAt read apart from the
// lease's start, a SELECT before the INSERT, says a lease that changes
// from claim to claim, and a hint to declare the first of them was
// nonsense).
func LeaseSaid(r *results.ScenarioResult) (said time.Duration, ok bool, spread [2]time.Duration) {
	h := r.History()
	if h == nil || r.LockTTL <= 0 {
		return 0, false, spread
	}
	var lo, hi time.Duration
	h.Has(func(op history.Op) bool {
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
		l := d.LeaseUntil.Sub(d.DecidedAt)
		if diff := l - gave; diff > gave/10 || -diff > gave/10 {
			if !ok || l < lo {
				lo = l
			}
			if !ok || l > hi {
				hi = l
			}
			said, ok = l, true
		}
		return false // every claim
	})
	if ok && hi-lo > hi/10 {
		return 0, false, [2]time.Duration{lo, hi}
	}
	return said, ok, spread
}
