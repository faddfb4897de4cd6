package harness

import (
	"sort"

	"github.com/idemcheck/idemcheck/stores"
)

// ClientMutant is a client-side classic bug (DESIGN.md §4), re-created as a
// workload option on the correct store: `idemcheck check --variant
// key-per-try` runs the correct store with clients that make the mistake.
type ClientMutant struct {
	Name string
	// Bug is one line on the mistake and what it costs.
	Bug string
	// Scenario is the scenario meant to catch it.
	Scenario string
	apply    func(c *Client, env *Env)
}

// ClientMutants lists the client-side mutants.
var ClientMutants = []ClientMutant{
	{"key-per-try", "makes a new key for every attempt (and passes it downstream): each retry is a new operation and charges again", "retry-after-charge",
		func(c *Client, _ *Env) { c.Keys, c.DownstreamByKey = KeyPerTry, true }},
	{"no-key", "sends no idempotency key at all, to the store or the provider: every retry charges again", "retry-after-charge",
		func(c *Client, _ *Env) { c.Keys, c.DownstreamKeyed = NoKey, false }},
	{"top-hop-only", "sends the key to the store but not downstream: work re-run after a crash or a takeover charges again", "crash",
		func(c *Client, _ *Env) { c.DownstreamKeyed = false }},
	{"lock-shorter-than-work", "sets LockTTL shorter than the work can take: a slow first call (2 x LockTTL) is taken over while healthy, and the work runs twice at once", "race",
		func(c *Client, env *Env) { c.FirstWorkTime = 2 * env.Config.LockTTL }},
	{"release-on-error-unkeyed", "releases the claim when the work fails, though the work is not idempotent downstream: the retry charges again", "retry-after-charge",
		func(c *Client, _ *Env) { c.Policy, c.DownstreamKeyed = stores.ReleaseOnError, false }},
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

// StoreVariant is the store variant the run opens: the correct store for a
// client-side mutant, else Variant itself.
func (o Options) StoreVariant() string {
	if IsClientMutant(o.Variant) {
		return stores.Correct
	}
	return o.Variant
}

// applyWorkload gives the client the run's client-side mutant, if any.
// NewClient calls it; a scenario that changes a client's options after
// NewClient calls it again, so the mutant's mistake is the one that stays.
func (e *Env) applyWorkload(c *Client) {
	if m, ok := LookupClientMutant(e.opts.Variant); ok {
		m.apply(c, e)
	}
}
