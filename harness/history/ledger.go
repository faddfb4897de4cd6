package history

import (
	"fmt"
	"sync"
)

// Charge is one charge request the payment provider received.
type Charge struct {
	ID     string `json:"id"`
	Order  string `json:"order"`
	Key    string `json:"key,omitempty"` // the downstream idempotency key, if sent
	Client int    `json:"client"`
	At     int64  `json:"at"`
	// Effective is false when the provider recognised the key and returned
	// an earlier charge instead of charging again.
	Effective bool `json:"effective"`
	// Via names the service instance that asked for the charge, when the
	// provider can tell (a black-box run gives each instance its own URL).
	Via string `json:"via,omitempty"`
	// End is when the provider answered the charge (black-box runs; 0
	// when not recorded): the charge was in progress from At to End.
	End int64 `json:"end,omitempty"`
	// Outcome is what the provider answered (black-box runs): "" or
	// [OutcomeCharged] for a charge id, [OutcomeFailed] for the failure it
	// drew after the effect, [OutcomeHungUp] when the service stopped
	// waiting first. The provider is the witness of its own failures: a
	// checker never needs the service to repeat them.
	Outcome string `json:"outcome,omitempty"`
}

// Outcomes of a black-box charge, as the provider answered it.
const (
	// OutcomeCharged: the provider answered with the charge id.
	OutcomeCharged = "charged"
	// OutcomeFailed: the provider made the charge and answered 503, as a
	// provider whose reply times out does.
	OutcomeFailed = "failed"
	// OutcomeHungUp: the service went away before the provider answered
	// (its own deadline, or the instance died).
	OutcomeHungUp = "hung-up"
)

// Errored reports whether the service got no charge id for the charge
// although it took effect.
func (c Charge) Errored() bool { return c.Outcome == OutcomeFailed || c.Outcome == OutcomeHungUp }

// Ledger is the downstream "payment provider": foreign state that the
// store cannot roll back. A charge sent with a key (charge:<orderId>) is
// made once per key; a charge sent without one is made every time. It is
// safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	charges []Charge
	byKey   map[string]string
	made    int // effective charges, for the next id
	// journal, when set, hears every charge (JournalTo).
	journal *journalOf
}

// NewLedger makes an empty ledger.
func NewLedger() *Ledger { return &Ledger{byKey: map[string]string{}} }

// LedgerOf rebuilds a ledger from its charges (a saved history's).
func LedgerOf(charges []Charge) *Ledger {
	l := NewLedger()
	for _, c := range charges {
		l.charges = append(l.charges, c)
		if c.Effective {
			l.made++
			if c.Key != "" {
				l.byKey[c.Key] = c.ID
			}
		}
	}
	return l
}

// Charge charges the order; key "" means no downstream idempotency key.
func (l *Ledger) Charge(order, key string, client int, at int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.journal != nil {
		defer func() { l.journal.record("charge", 0, "charge", l.charges[len(l.charges)-1]) }()
	}
	if key != "" {
		if id, ok := l.byKey[key]; ok {
			l.charges = append(l.charges, Charge{ID: id, Order: order, Key: key, Client: client, At: at})
			return id
		}
	}
	l.made++
	id := fmt.Sprintf("ch_%d", l.made)
	if key != "" {
		l.byKey[key] = id
	}
	l.charges = append(l.charges, Charge{ID: id, Order: order, Key: key, Client: client, At: at, Effective: true})
	return id
}

// Charges returns every charge call, effective or not.
func (l *Ledger) Charges() []Charge {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Charge(nil), l.charges...)
}

// EffectiveByOrder counts the effective charges of each order.
func (l *Ledger) EffectiveByOrder() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int{}
	for _, c := range l.charges {
		if c.Effective {
			m[c.Order]++
		}
	}
	return m
}
