package idemtest

import (
	"time"

	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/stores"
)

// Factory makes fresh, empty stores of one implementation.
type Factory struct {
	// Name labels the store in messages.
	Name string
	// Clock says whose clock the store judges staleness by. Caller-clock
	// stores are driven with a manual clock (time jumps cost nothing);
	// server-clock stores with small TTLs and real sleeps.
	Clock stores.ClockSource
	// Open returns a new store with no keys, configured by cfg (a fresh
	// file, schema or key prefix; cfg.Namespace is unique per call). The
	// suite closes it. Open may be called many times by one test: a file
	// store makes each one in a directory of the test's (t.TempDir()).
	Open func(cfg stores.Config) (stores.Store, error)

	// Semantics declares what the store does where the contract lets it
	// choose (ownership that ends with the lease, a release that keeps the
	// fingerprint, a lease per request): the model and every checker allow
	// what is declared, and only that. See stores.Semantics for what each
	// one means and the risk it takes on.
	Semantics stores.Semantics
	// Fence, if set, maps a token to its fencing number: the suite then
	// also proves that the numbers strictly increase with every claim of a
	// key (across takeovers, releases and prunes; within each life of its
	// record with Semantics.FenceRestartsPerLife). A store that gives the
	// number as a field of its decisions (stores.Decision.Fence) needs no
	// Fence: the suite holds it to those.
	Fence stores.Fence
	// WaitsAnnounced declares that a call never waits for another client
	// of the same store without first calling faults.Wait (or holding no
	// lock across the failpoints it passes): see
	// stores.Backend.WaitsAnnounced. The scheduled scenarios then wait for
	// a slow client instead of taking it to be blocked after 40 or 150 ms,
	// so a loaded CI runner cannot change a seed's interleaving. A wrong
	// declaration costs time (5 s per undeclared wait), never a verdict.
	WaitsAnnounced bool
	// LockTTL, if set, is the lease the store really keeps, whatever
	// [stores.Config.LockTTL] asks (a production lease of minutes, or a
	// floor under which it refuses a shorter one): the model test and
	// every scenario then run and judge at this LockTTL instead of the
	// suite's own. What a LockTTL this long would make the suite wait for
	// past its budget ([WaitBudget], [ModelSleepBudget]) is not
	// exercised, and the suite says so: a scenario skips naming the
	// wait, the model test logs what it left out. 0: the store honours
	// the LockTTL it is given.
	LockTTL time.Duration
	// Retention, if set, is the retention the store really keeps,
	// whatever [stores.Config.Retention] asks, as LockTTL is the lease:
	// the suite runs and judges at it, scenarios that set a retention of
	// their own included. 0: the store honours the retention it is given.
	Retention time.Duration
	// Clients and Keys, if set, are how many concurrent clients the
	// scenarios run and on how many keys (within harness.MaxClients and
	// harness.MaxKeys): more contention than the suite's defaults, which
	// are `idemcheck check`'s. 0: the defaults. The model test makes one
	// call at a time whatever they are.
	Clients, Keys int

	// Addr is where the store's data lives (a DSN, host:port) and OpenAt
	// opens a store like Open's (same cfg, so the same namespace) at
	// another address: the harness's network proxy in front of Addr. With
	// both and Network (harness/servers.Network), the network and
	// lost-reply scenarios run; with Server (harness/servers.NewFaults, for
	// a container the test started), store-faults and chaos pause and
	// restart the server too.
	Addr    string
	OpenAt  func(addr string, cfg stores.Config) (stores.Store, error)
	Network nemesis.Network
	Server  nemesis.Server
}
