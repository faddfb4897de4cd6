package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
)

// checkAtMostOnce proves [AtMostOnce]: the ledger shows no order charged
// twice, and no key saved done is claimed again inside its retention.
// Each order's charges are in its key's part, so an order's count in the
// part's ledger is its count in the run's.
func checkAtMostOnce(e Evidence, g grouped) atMostOnceTally {
	effective := e.Ledger.EffectiveByOrder()
	t := atMostOnceTally{orders: len(effective), keys: len(g.order)}
	charges := e.Ledger.Charges()
	for order, n := range effective {
		if n > 1 {
			var ids []string
			for _, c := range charges {
				if c.Order == order && c.Effective {
					ids = append(ids, fmt.Sprintf("%s by client %d at %s", c.ID, c.Client, ms(c.At)))
				}
			}
			t.charged = append(t.charged, Violation{AtMostOnce, order, fmt.Sprintf("order %s charged %d times: %s", order, n, strings.Join(ids, ", "))})
		}
	}
	// A key that was saved done must never be claimed again while it is
	// retained: that claim would run the work a second time. Only a claim
	// certainly inside the window counts: the store decided it at some
	// moment of its call and created the key at some moment of the first
	// claim's, so at most op.Return - created.Call passed between them (a
	// Begin that waited on a loaded machine may have been decided past
	// retention, on the server's clock, however early it was sent).
	//
	// The same holds on the store's own clock (mayBeExpired): a claim
	// decided past the retention by the clock the store judges by (a
	// scheduled episode's manual clock, which moves a LockTTL a tick) is
	// the store letting an expired key go, not the work running twice.
	//
	// The window starts with the first Begin that may have created the
	// key: a known claim, or an earlier Begin whose answer was lost (it may
	// have claimed on the server, and a store that keeps a key Retention
	// from its first request lets it go that much sooner: a Redis chaos
	// soak had a lost claim 10 s before the known takeover).
	keyed, order := g.keyed, g.order
	for _, k := range order {
		kops := keyed[k]
		created, ok := firstPossibleClaim(kops)
		if !ok {
			continue
		}
		var done *history.Op
		for i, op := range kops {
			if done == nil && op.Accepted(models.Complete) {
				done = &kops[i]
				continue
			}
			if done != nil && op.IsClaim() && op.Call > done.Return &&
				time.Duration(op.Return-created.Call) < e.Model.Retention-e.Model.Slack-time.Duration(done.Return-done.Call) &&
				!mayBeExpired(e.Model, created, op, g.prunes) {
				t.reran = append(t.reran, Violation{AtMostOnce, k.String(), fmt.Sprintf(
					"%s was claimed again by client %d at %s (token %s), after client %d saved it done at %s and inside the retention window: the work runs twice",
					k, op.Client, ms(op.Return), tok(op.Output.Decision.Token), done.Client, ms(done.Return))})
				break
			}
		}
	}
	return t
}

// atMostOnceTally is what checkAtMostOnce found in a part, or in the
// parts merged so far: the orders charged and the keys judged, the
// orders charged twice (charged) and the keys claimed again after they
// were saved done (reran), kept apart so that merged parts list them as
// one history would: the orders first.
type atMostOnceTally struct {
	orders, keys   int
	charged, reran []Violation
}

// add merges o, the next part's tally, into t.
func (t *atMostOnceTally) add(o atMostOnceTally) {
	t.orders += o.orders
	t.keys += o.keys
	t.charged = append(t.charged, o.charged...)
	t.reran = append(t.reran, o.reran...)
}

// decide is the [AtMostOnce] result of a run's merged tally.
func (t atMostOnceTally) decide() Result {
	vs := slices.Concat(t.charged, t.reran)
	sortViolations(vs)
	return judged(result(AtMostOnce, vs, fmt.Sprintf("%d orders charged, none twice; no work re-ran after done", t.orders)), t.orders+t.keys)
}
