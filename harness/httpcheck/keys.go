package httpcheck

import "github.com/idemcheck/idemcheck/harness/history"

// keyFacts is what the exchanges and the ledger say of each key, for the
// checkers that must know whether the service ever had a key with its own
// body (not a reuse's): a key whose every request was lost on the way is
// new to the service, whatever idemcheck sent.
type keyFacts struct {
	ownOrder  map[string]string // the order idemcheck sent with the key's own body
	succeeded map[string]bool   // a client got a success for the key's own body
	charged   map[string]bool   // orders the provider saw, whatever it answered
}

// factsOf reads the keys' facts once for every checker of a run.
func factsOf(xs []history.Exchange, charges []history.Charge) keyFacts {
	k := keyFacts{ownOrder: map[string]string{}, succeeded: map[string]bool{}, charged: map[string]bool{}}
	for _, x := range xs {
		if keyedOwn(x) {
			k.ownOrder[x.Key] = x.Order
			if success(x.Status) {
				k.succeeded[x.Key] = true
			}
		}
	}
	for _, c := range charges {
		k.charged[c.Order] = true
	}
	return k
}

// ownCharged reports whether the provider saw the key's own order: the
// service ran the key, whatever it answered since.
func (k keyFacts) ownCharged(key string) bool { return k.charged[k.ownOrder[key]] }

// had reports whether the service had the key with its own body: a client
// got a success for it, or the provider saw its order.
func (k keyFacts) had(key string) bool { return k.succeeded[key] || k.ownCharged(key) }
