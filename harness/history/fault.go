package history

import "github.com/idemcheck/idemcheck/stores"

// FaultKind names a kind of injected fault. Every kind the harness injects
// is listed here, so reports, counters and the loader agree on the names.
type FaultKind string

// Faults recorded one by one, as Fault records with a time window.
const (
	// FaultPause: a client held at a failpoint (a GC pause, a stalled
	// disk, or the controlled scheduler holding it while the clock moved
	// past LockTTL), then let go.
	FaultPause FaultKind = "pause"
	// FaultCrash: a client stopped at a failpoint and never cleaned up,
	// as a killed process would.
	FaultCrash FaultKind = "crash"
	// FaultWorkerKill: a worker process killed with SIGKILL, at a
	// failpoint it announced or wherever it was.
	FaultWorkerKill FaultKind = "worker-kill"
	// FaultServerPause: the store's server frozen (every process of its
	// container stopped, as with SIGSTOP) and thawed later.
	FaultServerPause FaultKind = "server-pause"
	// FaultServerRestart: the store's server killed with SIGKILL and
	// started again on the same data and address.
	FaultServerRestart FaultKind = "server-restart"
	// FaultNetLatency, FaultNetReset and FaultNetLostReply: a window in
	// which the network between clients and the server delayed replies,
	// reset connections, or lost replies (the request ran on the server).
	FaultNetLatency   FaultKind = "net-latency"
	FaultNetReset     FaultKind = "net-reset"
	FaultNetLostReply FaultKind = "net-lost-reply"
	// FaultStandbyLag: the standby of a replicated store cut off its
	// replication link while the primary keeps serving (a lagging
	// replica), until the failover.
	FaultStandbyLag FaultKind = "standby-lag"
	// FaultPrimaryPause: the primary of a replicated store frozen before
	// the harness gives up on it and fails over.
	FaultPrimaryPause FaultKind = "primary-pause"
	// FaultFailover: from the moment the primary of a replicated store
	// was lost (killed, or paused and then killed) until the clients are
	// routed to the promoted standby.
	FaultFailover FaultKind = "failover"
	// FaultPartition*: the primary of a replicated store cut off (docker
	// network disconnect) from its standby, from the clients, or from
	// both, until healed or failed over.
	FaultPartitionStandby FaultKind = "partition-standby"
	FaultPartitionClients FaultKind = "partition-clients"
	FaultPartitionBoth    FaultKind = "partition-both"
	// FaultStall: the harness's own process did not run for a while (a
	// loaded machine, a long GC): not injected, but observed (WatchStalls).
	// Every client in the process was in effect paused for that long, so
	// the checkers treat it as a pause of each owner holding a claim.
	FaultStall FaultKind = "harness-stall"
	// FaultInstanceKill and FaultInstancePause: a service instance of a
	// black-box run killed with SIGKILL (and started again at End), or
	// stopped with SIGSTOP until End. Failpoint names the instance.
	FaultInstanceKill  FaultKind = "instance-kill"
	FaultInstancePause FaultKind = "instance-pause"
)

// Faults counted, not recorded one by one (ScenarioResult.Faults adds them
// to the recorded ones): the calls a network fault actually hit, as the
// proxy counts them, and the clients given a skewed clock.
const (
	CountNetLatency   FaultKind = "latency"
	CountNetReset     FaultKind = "reset"
	CountNetLostReply FaultKind = "lost-reply"
	CountSkew         FaultKind = "skew"
)

// NetFault is the recorded kind of a network fault window, from the
// proxy's kind name (faults/netfault: "latency", "reset", "lost-reply").
func NetFault(kind string) FaultKind { return FaultKind("net-" + kind) }

// Fault is one injected fault. Client is -1 for a fault of the server or
// the network, which hits every client.
type Fault struct {
	Client    int           `json:"client"`
	Key       stores.KeyRef `json:"key"`
	Kind      FaultKind     `json:"kind"`
	Failpoint string        `json:"failpoint"`
	Start     int64         `json:"start"`
	End       int64         `json:"end"`
}

// OfClient reports whether the fault hit one client (a pause, a crash, a
// worker kill) rather than the server or the network.
func (f Fault) OfClient() bool { return f.Client >= 0 }
