package httpcheck

import (
	"fmt"

	"github.com/idemcheck/idemcheck/harness/history"
)

// chargedAtOnce says, in a note, how many orders a second instance called
// the provider for while the first's charge of the order was still being
// made, the second call of no effect by the order's downstream key alone:
// two executions of one key at the same time. A claim the instances share
// prevents it (unless its lease runs out during the provider's call); a
// lock in one instance's memory does not, and a run of such a service
// passed saying nothing, at-most-once held by the provider's key (its
// second execution then saved its own error over the first's success).
// Not a violation: no order was charged twice.
//
// Calls that do not say their instance (instances a user started call
// /charge, not /i/<name>/charge) cannot tell two executions from one
// request calling the provider again before its answer came: such
// overlaps are noted apart, saying so (the same service behind a proxy
// passed saying nothing).
func chargedAtOnce(charges []history.Charge) []string {
	effective := map[string][]history.Charge{}
	for _, c := range charges {
		if c.Effective {
			effective[c.Order] = append(effective[c.Order], c)
		}
	}
	n, first, untold, untoldFirst := 0, "", 0, ""
	said := map[string]bool{}
	for _, c := range charges {
		if c.Effective || said[c.Order] {
			continue
		}
		for _, e := range effective[c.Order] {
			if c.At < e.At || c.At >= e.End {
				continue
			}
			switch {
			case e.Via != "" && c.Via != "" && e.Via != c.Via:
				if n++; first == "" {
					first = fmt.Sprintf("order %s: %s made %s at %s, and %s called the provider for it at %s, before that charge was answered at %s",
						c.Order, e.Via, e.ID, ms(e.At), c.Via, ms(c.At), ms(e.End))
				}
			case e.Via == "" && c.Via == "":
				if untold++; untoldFirst == "" {
					untoldFirst = fmt.Sprintf("order %s: %s made at %s, the provider was called for it again at %s, before that charge was answered at %s",
						c.Order, e.ID, ms(e.At), ms(c.At), ms(e.End))
				}
			default:
				continue
			}
			said[c.Order] = true
			break
		}
	}
	var notes []string
	if n > 0 {
		notes = append(notes, fmt.Sprintf("%d orders were called for by two instances at once, the second call of no effect by the order's downstream key alone (the first, %s): two executions of one key at the same time, which a claim the instances share prevents (a lock in one instance's memory does not, nor a lease that runs out during the provider's call); at-most-once held by the provider's key", n, first))
	}
	if untold > 0 {
		notes = append(notes, fmt.Sprintf("%d orders were called for again while their charge was being made, the later call of no effect by the order's downstream key alone (the first, %s): the calls do not say which instance made them (an instance you start yourself is told apart when it calls the provider at /i/<name>/charge), so two executions of one key at once (a lock in one instance's memory) were not told apart from one request calling the provider again before its answer came; at-most-once held by the provider's key", untold, untoldFirst))
	}
	return notes
}
