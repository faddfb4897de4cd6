package httpcheck

import (
	"fmt"
	"sort"

	"github.com/idemcheck/idemcheck/harness/history"
)

// CauseNeverCharged is the answers checker's cause for a success whose
// order the provider never charged.
const CauseNeverCharged = "never-charged"

// neverCharged finds the keys that were answered a completed success
// ([completed]: not a 202, which only says the work was queued) for an
// order of which the provider's ledger holds no charge that took effect,
// in the whole run, probes included: a client was told its payment went
// through, and it never did. A correct service answers a success only
// once its work is done, so no fault excuses it; a service that saves its
// answer before the charge is confirmed, then dies between the two,
// replays that success to every retry (the classic save-before-effect
// bug, which at-most-once cannot see: nothing was charged twice).
//
// A key sent for more than one order (a --key-format of too few random
// digits) is left out: its answers may be another order's, which the
// answers checker notes apart. It applies only where the provider saw
// charges of the orders idemcheck sent ([chargedAny]): a service that
// never calls it is nothing tested, said before this.
func neverCharged(xs []history.Exchange, charges []history.Charge) []Violation {
	charged := map[string]bool{}
	for _, c := range charges {
		if c.Effective {
			charged[c.Order] = true
		}
	}
	orders := map[string]map[string]bool{} // key: the orders sent with it
	for _, x := range xs {
		if keyedOwn(x) {
			if orders[x.Key] == nil {
				orders[x.Key] = map[string]bool{}
			}
			orders[x.Key][x.Order] = true
		}
	}
	first := map[string]history.Exchange{} // key: its first success for an uncharged order
	for _, x := range xs {
		if !keyedOwn(x) || !x.Answered() || !completed(x.Status) || charged[x.Order] || len(orders[x.Key]) != 1 {
			continue
		}
		if f, seen := first[x.Key]; !seen || x.Return < f.Return {
			first[x.Key] = x
		}
	}
	keys := make([]string, 0, len(first))
	for k := range first {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return first[keys[i]].Return < first[keys[j]].Return })
	vs := make([]Violation, 0, len(keys))
	for _, k := range keys {
		x := first[k]
		vs = append(vs, Violation{Checker: Answers, Key: k, Cause: CauseNeverCharged, At: x.Return, Detail: fmt.Sprintf(
			"key %s got %d %q from %s at %s (client %d), but the provider never charged its order %s, in the whole run: a success for work that never ran (an answer saved before the charge was confirmed, replayed once its owner died; or a success answered before the work, which then never came)",
			k, x.Status, clip(x.Reply), x.Instance, ms(x.Return), x.Client, x.Order)})
	}
	return vs
}
