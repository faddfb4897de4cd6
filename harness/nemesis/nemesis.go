// Package nemesis injects the faults that do not live in a client: network
// faults between the store and its server, pauses and restarts of the
// server, kills of worker processes, and the seeded schedules that say
// when (Jepsen's nemesis). It works through small interfaces (Proxy,
// Network, Server) so that the scenarios that use it import no Docker,
// toxiproxy or database driver: faults/netfault and harness/servers
// implement them, and the CLI or a test plugs them in.
//
// Every fault injected is recorded in the history with its time window, so
// the checkers know which owners were unhealthy and the report can shade
// the windows.
package nemesis

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"time"
)

// Proxy is a network proxy between a store and its server that switches
// faults on and off (faults/netfault.Proxy implements it). Only one fault
// is on at a time in the scenarios; Heal switches every fault off.
type Proxy interface {
	// Latency delays every reply by d plus or minus jitter.
	Latency(d, jitter time.Duration) error
	// ResetConnections drops each request while on and tears its
	// connection down: the server never sees it.
	ResetConnections() error
	// LoseReplies lets requests through to the server, which runs them,
	// and drops the replies: the caller holds an unknown outcome.
	LoseReplies() error
	// LoseNextReply loses only the next reply.
	LoseNextReply() error
	// Heal switches every fault off.
	Heal() error
	// Hits counts, by fault kind, the calls a fault actually hit.
	Hits() map[string]int
	Close() error
}

// Network starts proxies in front of a store's server.
type Network interface {
	// Proxy starts a proxy named name in front of the server that addr
	// (the store's address: a DSN, host:port) reaches, and returns it with
	// the address that reaches the server through it.
	Proxy(name, addr string) (Proxy, string, error)
}

// Server pauses, kills and restarts the server behind a store
// (harness/servers implements it for the containers it starts). The
// server keeps its data and address across a restart, so stores
// reconnect by themselves.
type Server interface {
	// Kind names the server ("postgres", "redis") for messages.
	Kind() string
	// Pause freezes the server: connections stay open, calls hang.
	Pause(ctx context.Context) error
	// Resume thaws a paused server; the calls it had received run now.
	Resume(ctx context.Context) error
	// Restart kills the server with SIGKILL, starts it again, waits until
	// it answers, and says how long it did not.
	Restart(ctx context.Context) (time.Duration, error)
	// Heal undoes every fault and returns once the server answers.
	Heal(ctx context.Context) error
	Close() error
}

// The sides a Cluster's primary can be cut off from (Cluster.Partition).
const (
	// FromStandby cuts the replication link: the primary still serves
	// the clients, and the standby falls behind.
	FromStandby = "standby"
	// FromClients cuts the clients off: the standby still replicates.
	FromClients = "clients"
	// FromBoth isolates the primary.
	FromBoth = "both"
)

// Cluster is a replicated store's topology: a primary, a streaming
// standby, and the harness's router that sends the clients to the
// current primary (harness/servers implements it with containers on
// their own Docker networks). Failover is the harness acting as the
// failover manager: it fences the old primary and promotes the standby.
type Cluster interface {
	// Kind names the servers ("postgres", "redis") for messages.
	Kind() string
	// Ready returns once there is a primary with a standby streaming
	// from it, starting a new standby if a failover used the last one.
	Ready(ctx context.Context) error
	// LagStandby cuts the standby off its replication link: it falls
	// behind while the primary keeps serving. CatchUpStandby reconnects it.
	LagStandby(ctx context.Context) error
	CatchUpStandby(ctx context.Context) error
	// PausePrimary freezes the primary: its clients' calls hang.
	PausePrimary(ctx context.Context) error
	// Partition cuts the primary off from the standby, the clients or
	// both (FromStandby, FromClients, FromBoth).
	Partition(ctx context.Context, from string) error
	// Heal reconnects what Partition cut and thaws what was frozen.
	Heal(ctx context.Context) error
	// Failover fences the primary (SIGKILL: it never answers again),
	// promotes the standby and routes the clients to it.
	Failover(ctx context.Context) error
	Close() error
}

// Rand is the PRNG a fault schedule is drawn from: a function of the seed,
// the scenario and the round only (not of which other scenarios ran
// before), so the schedule replays with the seed.
func Rand(seed int64, scenario string, round int) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d", scenario, seed, round)
	return rand.New(rand.NewSource(int64(h.Sum64())))
}
