package stores

import "slices"

// Side says on which side of the contract a mutant's bug lives.
type Side string

const (
	// StoreSide: the store's code is wrong, one statement, script line or
	// Go condition beside the correct one.
	StoreSide Side = "store"
	// ConfigSide: the store's code is correct; the deployment it needs is
	// not (a server without persistence, asynchronous replication).
	ConfigSide Side = "config"
	// ClientSide: the correct store, with clients that make the mistake
	// (a workload option, harness/workload).
	ClientSide Side = "client"
)

// Mutant is one re-created classic bug: one row of [Catalogue].
type Mutant struct {
	// Name is the variant's name (`idemcheck check --variant NAME`).
	Name string
	Side Side
	// On lists the backends that implement a store-side or configuration
	// mutant, by registered name; empty for a client-side one, which runs
	// on every backend (the correct store, the clients wrong).
	On []string
	// Bug is one line on the bug it re-creates and what it costs.
	Bug string
	// Scenario is the scenario meant to kill it: a scheduled one
	// (harness/scenario/sched.go) where the bug needs an interleaving,
	// which kills it on every backend in a few episodes whatever the seed.
	Scenario string
	// Checker is the checker expected to catch it by name: the one whose
	// failure says what the bug did (a double charge, a stale write
	// accepted, a wrong answer replayed, a stuck key), and which its demo
	// on its home store (sqlite, or the first backend it belongs to) must
	// fail. Linearizability fails on most mutants too, but says least; it
	// is named only where nothing else can see the bug (the provider
	// dedupes by the order, so two owners at once charge once and only
	// the order of the answers betrays them). Other checkers may fail
	// too, and a hunt reports the one
	// [github.com/idemcheck/idemcheck/harness/check.Preference] ranks first.
	Checker string
	// Strict: the bug shows only as a finding (a key kept past its
	// retention, a store unavailable under contention), which a hunt
	// counts as a kill only in strict mode (strict retention and
	// availability).
	Strict bool
}

// TableBackends are the backends built on the decision table of
// docs/DESIGN.md §1, each of which carries every classic store-side
// mutant of it (the lease store, built on leases, carries its own).
var TableBackends = []string{"memory", "sqlite", "postgres", "redis"}

// Catalogue is every mutant, store side, configuration and client side,
// one row each: the one place a mutant is declared. Backends take their
// Backend.Mutants from it ([MutantsOn]), Register refuses a backend whose
// list differs, the hunt takes each mutant's side and scenario from it,
// `idemcheck list` prints it, and the tests iterate it.
//
// Adding a store-side mutant touches three places:
//
//  1. its row here: the name, StoreSide, the backends it exists on
//     (TableBackends for a classic bug of the decision table), the bug in
//     one line, the scenario meant to kill it and the checker expected to
//     catch it;
//  2. in each backend of On, the one statement, script line or Go
//     condition that differs, beside the correct code it replaces
//     (stores/sqlite/statements.go's statementsFor,
//     stores/postgres/statements.go's variants, stores/redis/scripts.go's
//     variants, the variant's case in stores/memory/memory.go or
//     stores/lease/lease.go);
//  3. its test: a short counterexample that shows the bug on the mutant
//     and not on the correct store, in stores/storetest.Bugs when every
//     backend can share it, else in the backend's mutants_test.go.
//
// Nothing else lists mutants: a backend test that finds no counterexample
// for one of its rows fails, and so does the catalogue's test if the row's
// scenario or checker does not exist. A client-side row also needs its
// mistake in harness/workload (a function of the client); a configuration
// row, the deployment its backend sets up for it.
var Catalogue = []Mutant{
	// The classic bugs of the decision table, on every table backend.
	{Name: "select-then-insert", Side: StoreSide, On: TableBackends, Scenario: "sched-race", Checker: "at-most-once",
		Bug: "reads the key, then inserts in a second statement: two concurrent requests both see none and both run"},
	{Name: "unfenced-complete", Side: StoreSide, On: TableBackends, Scenario: "sched-takeover", Checker: "fencing",
		Bug: "saves the response without checking the token: a stale owner overwrites the new owner's answer"},
	{Name: "unfenced-release", Side: StoreSide, On: TableBackends, Scenario: "sched-takeover", Checker: "fencing",
		Bug: "deletes the claim without checking the token: a stale owner deletes the new owner's claim"},
	{Name: "no-fingerprint", Side: StoreSide, On: TableBackends, Scenario: "sched-mismatch", Checker: "mismatch",
		Bug: "ignores the fingerprint: a reused key with other parameters replays the wrong answer"},
	{Name: "blind-takeover", Side: StoreSide, On: TableBackends, Scenario: "sched-crash", Checker: "at-most-once",
		Bug: "takes over a stale claim without compare-and-set: two takers both win"},
	{Name: "takeover-by-state", Side: StoreSide, On: TableBackends, Scenario: "sched-mismatch", Checker: "linearizability",
		Bug: "reads a stale claim, then takes over any row still in flight and stale (UPDATE … WHERE in_flight AND stale), not the claim it read: after a release, another request's claim and its expiry, the taker holds a claim of other parameters and saves its answer there"},
	{Name: "token-reuse", Side: StoreSide, On: TableBackends, Scenario: "sched-takeover", Checker: "fencing",
		Bug: "uses locked_at as the fencing token (the card's scheme): a token comes back after release and a stale save lands"},
	{Name: "no-takeover", Side: StoreSide, On: TableBackends, Scenario: "sched-crash", Checker: "liveness",
		Bug: "never recovers a stale claim: a crashed owner's key is stuck in flight forever"},
	{Name: "short-retention", Side: StoreSide, On: TableBackends, Scenario: "sched-retention", Checker: "at-most-once",
		Bug: "prunes keys younger than the retention window: a retry inside the window runs again"},
	{Name: "stale-overwrite", Side: StoreSide, On: TableBackends, Scenario: "sched-takeover", Checker: "at-most-once",
		Bug: "decides a takeover on a stale read and overwrites a record that was finished meanwhile"},
	{Name: "case-folded-key", Side: StoreSide, On: TableBackends, Scenario: "key-space", Checker: "mismatch",
		Bug: "compares keys case-insensitively: two operations whose keys differ only in case share one record, and the second is refused or replayed the first one's answer"},
	{Name: "tenant-blind", Side: StoreSide, On: TableBackends, Scenario: "key-space", Checker: "mismatch",
		Bug: "looks keys up without their tenant: two customers using the same key name share one record"},
	{Name: "joined-key", Side: StoreSide, On: TableBackends, Scenario: "key-space", Checker: "mismatch",
		Bug: "joins tenant and key with \":\" into one lookup key, unescaped: tenant \"t:x\" with key \"k\" and tenant \"t\" with key \"x:k\" share one record, and one customer is refused or replayed another's answer"},
	{Name: "fingerprint-drops-amount", Side: StoreSide, On: TableBackends, Scenario: "mismatch", Checker: "mismatch",
		Bug: "normalises the amount's value out of the fingerprint (a careless canonicalisation): a key reused with another amount is replayed the first answer instead of 422"},
	{Name: "complete-overwrites-done", Side: StoreSide, On: TableBackends, Scenario: "abuse", Checker: "replay-fidelity",
		Bug: "saves a response without checking that the key is still in flight: a save sent twice (a retried request) overwrites the answer already replayed to others"},
	{Name: "release-deletes-done", Side: StoreSide, On: TableBackends, Scenario: "abuse", Checker: "at-most-once",
		Bug: "deletes a claim without checking that the key is still in flight: a release in a defer, after the save, deletes the saved answer and a retry runs the work again"},
	{Name: "release-token-like", Side: StoreSide, On: []string{"memory", "sqlite", "postgres", "redis"}, Scenario: "abuse", Checker: "linearizability",
		Bug: "matches the release's token as a pattern (SQL LIKE, a glob in Go, string.find in a Redis script), not for equality: a token holding % or * or .* (forged, or malformed by a client) matches the owner's, and a stranger's release deletes a live claim, so another client claims the key while the owner works"},
	{Name: "prune-drops-tenant", Side: StoreSide, On: []string{"memory", "sqlite", "postgres"}, Scenario: "retention", Checker: "at-most-once",
		Bug: "prunes by key name alone (DELETE … WHERE key IN (SELECT key … expired)): an expired key deletes the young keys of the same name in every other tenant, and their retries run again"},
	{Name: "prune-sweeps-in-flight", Side: StoreSide, On: TableBackends, Scenario: "sched-race", Checker: "linearizability",
		Bug: "prunes in-flight claims whatever their age (a cleanup of \"abandoned\" claims): a live owner's claim vanishes and another client claims the key while it works"},
	{Name: "never-expire", Side: StoreSide, On: TableBackends, Scenario: "retention", Checker: "retention", Strict: true,
		Bug: "never lets a key go: Prune removes nothing, so keys outlive their retention (a leak, and a reused key never becomes new)"},
	{Name: "takeover-ignores-fingerprint", Side: StoreSide, On: slices.Concat(TableBackends, []string{"lease"}), Scenario: "sched-mismatch", Checker: "mismatch",
		Bug: "takes over a stale claim without comparing the fingerprint: a request with other parameters, arriving once the owner's claim went stale, runs instead of getting 422"},

	// A bug of the caller-clock backends, whose clock a scheduled episode
	// moves by the millisecond: on a server's clock the boundary lies
	// within the model's Slack, where either answer is right, so the bug
	// cannot be told from the correct store there.
	{Name: "stale-boundary", Side: StoreSide, On: []string{"memory", "sqlite"}, Scenario: "sched-crash", Checker: "linearizability",
		Bug: "judges a claim stale only past LockTTL (> instead of >=): at exactly LockTTL a crashed owner's claim still answers 409, where the contract lets the key be taken over"},

	// A bug of the caller-clock backends, whose retention boundary a
	// scheduled episode lands on to the millisecond (RetentionEdge).
	{Name: "created-in-seconds", Side: StoreSide, On: []string{"memory", "sqlite"}, Scenario: "sched-retention", Checker: "linearizability",
		Bug: "prunes by the creation time in whole seconds (a Unix timestamp, a DATETIME without fractions): a key is pruned up to a second before its retention ends, and a retry inside the window runs the work again"},

	// A bug of the server-clock backends: a caller-clock store (sqlite,
	// memory) judges by the request's clock by design, and says so.
	{Name: "request-clock", Side: StoreSide, On: []string{"postgres", "redis", "lease"}, Scenario: "skew", Checker: "exclusive-execution",
		Bug: "judges staleness by the request's clock in a store that declares the server's (the card's locked_at from the caller): a client whose clock runs ahead takes a healthy owner over"},

	// Bugs of one backend's protocol, with no counterpart in the others.
	{Name: "process-lock", Side: StoreSide, On: []string{"sqlite"}, Scenario: "workers", Checker: "linearizability",
		Bug: "guards a select-then-insert with a mutex in the process's memory: requests one process serves never race, but two processes on the same database (app servers, workers) both read no row and both claim"},
	{Name: "split-claim", Side: StoreSide, On: []string{"redis"}, Scenario: "sched-race", Checker: "linearizability",
		Bug: "asks EXISTS, then claims with a second command when the key was absent (a get-then-set a team writes without a failpoint between): two requests both see no key and both run"},
	{Name: "release-deletes-prefix", Side: StoreSide, On: []string{"redis"}, Scenario: "key-space", Checker: "at-most-once",
		Bug: "releases \"the key and its side keys\" with KEYS key*: every key whose name extends the released one (\"k-1\" releases \"k-10\") loses its record, and its retry runs the work again"},
	{Name: "fence-not-incremented", Side: StoreSide, On: []string{"lease"}, Scenario: "sched-takeover", Checker: "fencing",
		Bug: "takes a stale claim over with a new owner but the old fencing number: downstream systems that fence by the number let the old owner's writes through"},

	// Configuration mutants: the store's code is correct, the deployment
	// it needs is not.
	{Name: "redis-no-persistence", Side: ConfigSide, On: []string{"redis"}, Scenario: "store-faults", Checker: "at-most-once",
		Bug: "runs Redis without persistence (no AOF, no snapshots): a server restart forgets acknowledged claims and saved answers, and retries run the work again"},
	{Name: "postgres-repeatable-read", Side: ConfigSide, On: []string{"postgres"}, Scenario: "race", Checker: "availability", Strict: true,
		Bug: "runs the store's sessions at REPEATABLE READ (a database's default_transaction_isolation, a pool's setting): a race's losers get serialization failures (40001) instead of 409, and every client behind them retries an error where it was owed an answer"},
	{Name: "postgres-async-replication", Side: ConfigSide, On: []string{"postgres-replicated"}, Scenario: "failover", Checker: "at-most-once",
		Bug: "commits with synchronous_commit = local on a primary with a standby: a commit is acknowledged before the standby has it, and a failover to that standby forgets acknowledged claims and answers, so retries run the work again"},
	{Name: "redis-async-replication", Side: ConfigSide, On: []string{"redis-replicated"}, Scenario: "failover", Checker: "at-most-once",
		Bug: "answers without WAIT on a primary with a replica (Redis's default asynchronous replication): a reply is sent before the replica has what it says, and a failover to that replica forgets acknowledged claims and answers, so retries run the work again"},

	// Client-side mutants (docs/DESIGN.md §4), sorted by name: the correct
	// store, with clients that make the mistake.
	{Name: "key-per-try", Side: ClientSide, Scenario: "retry-after-charge", Checker: "at-most-once",
		Bug: "makes a new key for every attempt (and passes it downstream): each retry is a new operation and charges again"},
	{Name: "lock-shorter-than-work", Side: ClientSide, Scenario: "race", Checker: "exclusive-execution",
		Bug: "sets LockTTL shorter than the work can take: a slow first call (2 x LockTTL) is taken over while healthy, and the work runs twice at once"},
	{Name: "no-key", Side: ClientSide, Scenario: "retry-after-charge", Checker: "at-most-once",
		Bug: "sends no idempotency key at all, to the store or the provider: every retry charges again"},
	{Name: "release-on-error-unkeyed", Side: ClientSide, Scenario: "retry-after-charge", Checker: "at-most-once",
		Bug: "releases the claim when the work fails, though the work is not idempotent downstream: the retry charges again"},
	{Name: "top-hop-only", Side: ClientSide, Scenario: "crash", Checker: "at-most-once",
		Bug: "sends the key to the store but not downstream: work re-run after a crash or a takeover charges again"},
}

// LookupMutant returns the named row of [Catalogue].
func LookupMutant(name string) (Mutant, bool) {
	for _, m := range Catalogue {
		if m.Name == name {
			return m, true
		}
	}
	return Mutant{}, false
}

// RunsOn reports whether the mutant runs on the named backend: a
// client-side one on every backend, any other on those of its On.
func (m Mutant) RunsOn(backend string) bool {
	return m.Side == ClientSide || slices.Contains(m.On, backend)
}

// MutantsOn lists the store-side and configuration mutants the named
// backend implements, in the catalogue's order: its Backend.Mutants.
func MutantsOn(backend string) []string {
	var out []string
	for _, m := range Catalogue {
		if m.Side != ClientSide && slices.Contains(m.On, backend) {
			out = append(out, m.Name)
		}
	}
	return out
}

// MutantNames lists the names of the catalogue's rows of one side, in the
// catalogue's order.
func MutantNames(side Side) []string {
	var out []string
	for _, m := range Catalogue {
		if m.Side == side {
			out = append(out, m.Name)
		}
	}
	return out
}
