package scenario

import (
	"context"
	"fmt"

	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/stores"
)

// Caps says what a run can do besides calling its store: where the data
// lives and which fault tools it has.
type Caps struct {
	// Backend names the store and says whose clock it judges by and where
	// it keeps its data (a zero Lives: unknown, as for a factory's store).
	Backend stores.Backend
	// Factory: the store comes from a factory (idemtest), not from the
	// registry, so a worker process cannot open it.
	Factory bool
	// Addr is where the store's data lives (a server's DSN or host:port,
	// a directory for SQLite files); "" if not known.
	Addr string
	// OpenAt opens the run's store on the same data at another address
	// (through a proxy); nil if the store cannot be.
	OpenAt func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error)
	// Net starts proxies in front of the server; nil: no network faults.
	Net nemesis.Network
	// Server pauses and restarts the server; nil: no server faults, and
	// NoServer says why (the server is not a container of this run).
	Server   nemesis.Server
	NoServer string
	// Cluster is the replicated topology behind the store (a primary, a
	// standby, the router): nil unless the backend is replicated and the
	// run started its topology (see ClusterSkip).
	Cluster nemesis.Cluster
	// WorkerCommand starts an `idemcheck worker` process (argv); empty:
	// no worker processes.
	WorkerCommand []string
	// Semantics are the store's declared choices (stores.Semantics): a
	// scenario that needs one (a lease per request) runs only when declared.
	Semantics stores.Semantics
}

const netNeeds = "a Postgres or Redis server to put a network proxy in front of"

// NetSkip says why a run cannot fault the network between the store and
// its data, or "" if it can.
func NetSkip(c Caps) string {
	switch {
	case c.Factory && (c.OpenAt == nil || c.Addr == ""):
		return "the store comes from a factory without a server address (Factory.Addr and OpenAt): no server to put a proxy in front of"
	case c.Backend.Lives != stores.Server && !c.Factory:
		return fmt.Sprintf("network faults need a server between the store and its data; %s is embedded (run with --store postgres or redis; an exec store over a server declares \"lives\": \"server\" in its hello)", c.Backend.Name)
	case c.Addr == "":
		return "no server address to put a proxy in front of"
	case c.OpenAt == nil:
		return "the store cannot be opened through a proxy (no OpenAt)"
	case c.Net == nil:
		return "no network proxy available (harness.Options.Net; in idemtest, Factory.Network with Addr and OpenAt)"
	}
	return ""
}

// WorkersSkip says why worker processes cannot run, or "" if they can.
func WorkersSkip(c Caps) string {
	switch {
	case c.Backend.Lives == stores.InProcess:
		return fmt.Sprintf("the %s store lives inside one process: worker processes cannot share it", c.Backend.Name)
	case c.Factory:
		return "the store comes from a factory, which a worker process cannot open"
	case len(c.WorkerCommand) == 0:
		return "no worker command (Options.WorkerCommand): run from the idemcheck CLI"
	}
	return ""
}

// ServerSkip says why the server behind the store cannot be paused and
// restarted, or "" if it can.
func ServerSkip(c Caps) string {
	switch {
	case c.Server != nil:
		return ""
	case c.Backend.Lives != stores.Server && !c.Factory:
		return fmt.Sprintf("the %s store is embedded: there is no server to pause or restart (killed processes are the workers scenario)", c.Backend.Name)
	case c.NoServer != "":
		return c.NoServer
	case c.Factory:
		return "the store comes from a factory: its server, if any, is not known to the harness (Factory.Server)"
	}
	return "no server control (Options.Server): run from the idemcheck CLI"
}

// ClusterSkip says why the run has no replicated topology to fail over
// and partition, or "" if it has one. Every store that is not replicated
// (a single server, an embedded store, a factory's) skips the failover
// and partition scenarios with it.
func ClusterSkip(c Caps) string {
	switch {
	case c.Cluster != nil:
		return ""
	case c.Backend.Replicated == "":
		name := c.Backend.Name
		if name == "" {
			name = "factory"
		}
		return fmt.Sprintf("the %s store is not replicated: failover and partitions need a primary with a standby (run with --store postgres-replicated or redis-replicated)", name)
	}
	return "no replicated topology (Options.Cluster): run from the idemcheck CLI"
}
