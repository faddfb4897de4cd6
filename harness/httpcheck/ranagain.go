package httpcheck

import (
	"fmt"

	"github.com/idemcheck/idemcheck/harness/history"
)

// ranAgain says why a probe's 5xx is no saved error, replayed: a charge
// of its order (cs) began while the probe was open ([chargedWithin]), so
// its request ran the key's work again. A call of no effect there, for
// an order never charged, is one the provider refused (422) because its
// downstream key had made a charge for another order first (byID: the
// effective charges by id): one downstream key for two orders, so this
// order can never be charged, and its key fails on every retry. A
// service whose downstream key is its idempotency key alone, and which
// ran another order's request under the key (its claim released after
// an error), does this; idemcheck took the key's 5xx for a saved error,
// and with --saves-errors passed it.
func ranAgain(cs []history.Charge, byID map[string]history.Charge, x history.Exchange) string {
	for _, c := range cs {
		if !beganWithin(c, x) {
			continue
		}
		if first, ok := byID[c.ID]; !c.Effective && ok && first.Order != c.Order {
			return fmt.Sprintf("its request having run the key's work again: it called the provider for order %s at %s, refused, the downstream key %q having made charge %s for order %s first (one downstream key for two orders: another order's request ran under it, and this order can never be charged)",
				c.Order, ms(c.At), c.Key, first.ID, first.Order)
		}
		return fmt.Sprintf("its request having run the key's work again (it called the provider for order %s at %s): no saved answer, replayed", c.Order, ms(c.At))
	}
	return ""
}

// chargesByID indexes the effective charges by their id: a call of no
// effect names the charge its downstream key made.
func chargesByID(charges []history.Charge) map[string]history.Charge {
	m := map[string]history.Charge{}
	for _, c := range charges {
		if c.Effective {
			m[c.ID] = c
		}
	}
	return m
}
