package workload

import (
	"sort"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// ClientMutant is a client-side classic bug (docs/DESIGN.md §4), re-created
// as a workload option on the correct store: `idemcheck check --variant
// key-per-try` runs the correct store with clients that make the mistake.
type ClientMutant struct {
	Name string
	// Bug is one line on the mistake and what it costs.
	Bug string
	// Scenario is the scenario meant to catch it.
	Scenario string
	apply    func(c *Client, lockTTL time.Duration)
}

// Apply gives the client the mistake; lockTTL is the store's.
func (m ClientMutant) Apply(c *Client, lockTTL time.Duration) { m.apply(c, lockTTL) }

// ClientMutants lists the client-side mutants.
var ClientMutants = []ClientMutant{
	{"key-per-try", "makes a new key for every attempt (and passes it downstream): each retry is a new operation and charges again", "retry-after-charge",
		func(c *Client, _ time.Duration) { c.Keys, c.DownstreamByKey = KeyPerTry, true }},
	{"no-key", "sends no idempotency key at all, to the store or the provider: every retry charges again", "retry-after-charge",
		func(c *Client, _ time.Duration) { c.Keys, c.DownstreamKeyed = NoKey, false }},
	{"top-hop-only", "sends the key to the store but not downstream: work re-run after a crash or a takeover charges again", "crash",
		func(c *Client, _ time.Duration) { c.DownstreamKeyed = false }},
	{"lock-shorter-than-work", "sets LockTTL shorter than the work can take: a slow first call (2 x LockTTL) is taken over while healthy, and the work runs twice at once", "race",
		func(c *Client, ttl time.Duration) { c.FirstWorkTime = 2 * ttl }},
	{"release-on-error-unkeyed", "releases the claim when the work fails, though the work is not idempotent downstream: the retry charges again", "retry-after-charge",
		func(c *Client, _ time.Duration) { c.Policy, c.DownstreamKeyed = stores.ReleaseOnError, false }},
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
