package workload

import (
	"fmt"
	"sort"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// ClientMutant is a client-side classic bug (docs/DESIGN.md §4), re-created
// as a workload option on the correct store: `idemcheck check --variant
// key-per-try` runs the correct store with clients that make the mistake.
// Its name, bug and scenario are its row of stores.Catalogue.
type ClientMutant struct {
	stores.Mutant
	apply func(c *Client, lockTTL time.Duration)
}

// Apply gives the client the mistake; lockTTL is the store's.
func (m ClientMutant) Apply(c *Client, lockTTL time.Duration) { m.apply(c, lockTTL) }

// mistakes gives each client-side row of stores.Catalogue its mistake, by
// name: what the client does wrong.
var mistakes = map[string]func(c *Client, lockTTL time.Duration){
	"key-per-try":              func(c *Client, _ time.Duration) { c.Keys, c.DownstreamByKey = KeyPerTry, true },
	"no-key":                   func(c *Client, _ time.Duration) { c.Keys, c.DownstreamKeyed = NoKey, false },
	"top-hop-only":             func(c *Client, _ time.Duration) { c.DownstreamKeyed = false },
	"lock-shorter-than-work":   func(c *Client, ttl time.Duration) { c.FirstWorkTime = 2 * ttl },
	"release-on-error-unkeyed": func(c *Client, _ time.Duration) { c.Policy, c.DownstreamKeyed = stores.ReleaseOnError, false },
}

// ClientMutants lists the client-side mutants: the client-side rows of
// stores.Catalogue, in its order, each with its mistake.
var ClientMutants = clientMutants()

// clientMutants pairs each client-side row with its mistake; a row without
// one, or a mistake without a row, is a programming error.
func clientMutants() []ClientMutant {
	var out []ClientMutant
	for _, m := range stores.Catalogue {
		if m.Side != stores.ClientSide {
			continue
		}
		apply, ok := mistakes[m.Name]
		if !ok {
			panic("workload: client-side mutant " + m.Name + " has no mistake")
		}
		out = append(out, ClientMutant{m, apply})
	}
	if len(out) != len(mistakes) {
		panic(fmt.Sprintf("workload: %d mistakes for %d client-side mutants of stores.Catalogue", len(mistakes), len(out)))
	}
	return out
}

// LookupClientMutant returns the named client-side mutant.
func LookupClientMutant(name string) (ClientMutant, bool) {
	for _, m := range ClientMutants {
		if m.Name == name {
			return m, true
		}
	}
	return ClientMutant{}, false
}

// IsClientMutant reports whether the variant is a client-side mutant.
func IsClientMutant(name string) bool {
	_, ok := LookupClientMutant(name)
	return ok
}

// ClientMutantNames lists the client-side mutants, sorted.
func ClientMutantNames() []string {
	var out []string
	for _, m := range ClientMutants {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return out
}

// StoreVariant is the store variant a run of variant opens: the correct
// store for a client-side mutant, else the variant itself.
func StoreVariant(variant string) string {
	if IsClientMutant(variant) {
		return stores.Correct
	}
	return variant
}
