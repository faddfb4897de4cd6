package httpcheck

import (
	"slices"

	"github.com/idemcheck/idemcheck/harness/history"
)

// asksLater reports whether a 5xx asked to be tried again later
// (Retry-After): the service's own word that the key has no answer yet,
// not a saved error (a service stuck on a key and answering 503 with a
// Retry-After passed liveness, each probe's 5xx taken for the key's
// saved error).
func asksLater(x history.Exchange) bool {
	return x.Answered() && x.Status >= 500 && x.RetryAfter > 0
}

// gatewayStatus reports whether an answer is a gateway's 502 or 504
// without a Retry-After: one no limiter gives.
func gatewayStatus(x history.Exchange) bool {
	return x.Answered() && (x.Status == 502 || x.Status == 504) && x.RetryAfter == 0
}

// chargedWithin reports whether a charge of cs began while x was open.
func chargedWithin(cs []history.Charge, x history.Exchange) bool {
	return slices.ContainsFunc(cs, func(c history.Charge) bool { return beganWithin(c, x) })
}

// beganWithin reports whether the charge c began while x was open.
func beganWithin(c history.Charge, x history.Exchange) bool {
	return c.At >= x.Call && c.At <= x.Return
}
