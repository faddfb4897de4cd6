package httpcheck

import (
	"cmp"
	"fmt"

	"github.com/idemcheck/idemcheck/harness/history"
)

// rekeyed says, of two effective charges of one order, what downstream
// keys they sent: a released claim is safe only when the retry sends the
// first attempt's key (the provider then answers the charge that went
// through), so a release on error is told with the keys that made it
// unsafe (a new key per request was said to be the release alone, which
// the docs call correct).
func rekeyed(first, second history.Charge) string {
	if first.Key == "" && second.Key == "" {
		return "; the provider was sent no downstream key, so it could not tell the retry from a new charge (with the first attempt's key the release would be safe)"
	}
	return fmt.Sprintf("; the retry sent the provider a new downstream key (%s, then %s), so it could not tell the retry from a new charge (with the first attempt's key the release would be safe)", cmp.Or(first.Key, "none"), cmp.Or(second.Key, "none"))
}

// unkeyedRerun is what an excused charge after a crash adds when the two
// charges carried no downstream key, or different ones: the key at every
// hop (the lesson card's charge:<orderId>) makes the re-run of no
// effect, and a service without it passed its crash's double charge
// saying only that it was excused.
func unkeyedRerun(first, second history.Charge) string {
	switch {
	case first.Key == "" && second.Key == "":
		return " (but neither charge carried a downstream key: with one, the key at every hop, the re-run would have been of no effect; the lesson card's bug of the key only at the top hop)"
	case first.Key != second.Key:
		return fmt.Sprintf(" (but the two charges carried different downstream keys, %q and %q: with the same one the re-run would have been of no effect)", first.Key, second.Key)
	}
	return ""
}

// hungUpWith counts the other charges of c's instance ("an instance"
// when the provider could not tell) whose connection closed unanswered
// ([history.OutcomeHungUp]) within hangUpBurst of c's.
func hungUpWith(charges []history.Charge, c history.Charge) int {
	if c.Outcome != history.OutcomeHungUp {
		return 0
	}
	n := 0
	for _, o := range charges {
		if o.ID != c.ID && o.Outcome == history.OutcomeHungUp && o.Via == c.Via && o.End >= c.End-hangUpBurst && o.End <= c.End+hangUpBurst {
			n++
		}
	}
	return n
}
