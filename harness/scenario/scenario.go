// Package scenario holds the named workloads of a run, like Jepsen's: each
// drives a store through an Env (its clients, orders, faults and
// schedules) and leaves a history for the checkers. The registry is one
// ordered list (All), the order `--scenario all` runs them in.
//
// A scenario may need more than a store: worker processes that open the
// same data, a proxy in front of a server, a server it can pause. Caps
// says what a run has; a scenario that needs what is missing is skipped,
// saying why, and counts as neither pass nor fail.
package scenario

import (
	"context"
	"strings"
	"time"
)

// Scenario is a named workload with its faults.
type Scenario struct {
	Name string
	// Doc says in a line what the scenario does and which bugs it exposes.
	Doc string
	// Retention overrides the store's retention for this scenario (0: the
	// run's default).
	Retention time.Duration
	// Needs names what the scenario needs beyond a Store (worker
	// processes, a network proxy, a server it can pause), for listings;
	// "" for nothing.
	Needs string
	// Skip, if set, says why the scenario cannot run with these
	// capabilities; "" means it can.
	Skip func(Caps) string
	// Scheduled marks the scenarios run under the controlled scheduler,
	// one episode per key (see Episode).
	Scheduled bool
	// TTLs and PerKey say roughly how long one round takes, for run-time
	// estimates: TTLs LockTTLs (the waits past LockTTL, fault windows),
	// plus PerKey LockTTLs for each key the scenario works through one
	// after another. Retentions counts retention periods waited for.
	// A scenario whose clients only back off while a claim is held, which
	// a correct store's claims are not for long, has no TTLs: at a lease
	// of minutes it takes what it takes at the default (race, abuse).
	TTLs, PerKey, Retentions float64
	// NeedsExtender marks a scenario that runs only on a store that
	// renews leases (stores.Extender): known once a store is open, so
	// the scenario skips then, and idemtest.Require opens one to ask.
	NeedsExtender bool
	// OnRequest marks a scenario that runs only when named: `all` (and
	// idemtest.Run) leave it out (stress, whose history is as large as
	// the store is fast).
	OnRequest bool
	// Fixed is a round's wall time that does not scale with LockTTL (the
	// stress scenario's calibration and window), for estimates.
	Fixed time.Duration
	// Calls and ClientCalls say roughly how many store calls one round
	// makes for each key: Calls, plus ClientCalls for each client, as
	// measured (`idemcheck check --keys 100 --clients 4|16 --lock-ttl
	// 100ms` on memory, sqlite, postgres and redis, the largest per key
	// kept). Forecasts of a run's calls and of the wall time its calls
	// take (Estimate), where LockTTLs alone would say a tiny LockTTL
	// makes a run of thousands of keys free.
	Calls, ClientCalls float64
	// Alone, if set, says the scenario must not share the machine or the
	// server with other scenarios under these capabilities: it pauses,
	// kills or fails over what they use too (the server, the cluster), or
	// it measures the machine (stress). The runner runs such scenarios
	// one at a time after the others (see Phase).
	Alone func(Caps) bool
	// FaultsServer marks the Alone scenarios that are alone only because
	// they pause, kill and restart the run's one server: given a server of
	// their own (harness.Options.OwnServer) they may share the machine.
	FaultsServer bool
	run          func(ctx context.Context, env *Env)
}

// Cost estimates one round's wall time with this LockTTL, retention and
// number of keys (0 keys: the fixed part only), plus the final probe.
func (s Scenario) Cost(ttl, retention time.Duration, keys int) time.Duration {
	if s.Retention > 0 {
		retention = s.Retention
	}
	return s.Fixed + time.Duration((s.TTLs+1+s.PerKey*float64(keys))*float64(ttl)+s.Retentions*float64(retention))
}

// EstimateCalls forecasts the store calls of one round with this many keys
// and clients (see Calls).
func (s Scenario) EstimateCalls(keys, clients int) int64 {
	return int64((s.Calls + s.ClientCalls*float64(clients)) * float64(keys))
}

// Phase says when the runner may run the scenario with these
// capabilities (see Phase's values).
func (s Scenario) Phase(c Caps) Phase {
	switch {
	case s.Alone != nil && s.Alone(c):
		return Alone
	case s.Scheduled:
		return Scheduled
	}
	return Shared
}

// Phase is a group of scenarios a runner may run at once: every scenario
// has its own store (file, schema or key prefix), clients, proxies and
// worker processes, so only what they share outside the store (the
// server, the machine's load) keeps some apart.
type Phase int

const (
	// Shared scenarios run beside one another.
	Shared Phase = iota
	// Scheduled scenarios run apart from the shared ones: the scheduler
	// learns that a client blocked in the store by a timeout, which a
	// machine loaded by other scenarios can trip, and a seed must give
	// the same trace. On a server-clock store they run side by side while
	// their slots (Scenario.Slots) fit EpisodesAtOnce, else one at a time.
	Scheduled
	// Alone scenarios run one at a time, after the rest: they pause,
	// kill or fail over what the others use (the server, the cluster),
	// or they measure the machine.
	Alone
)

// always and serverFaults are Alone functions: always alone, or alone when
// the scenario will pause and restart the run's server or cluster.
func always(Caps) bool         { return true }
func serverFaults(c Caps) bool { return c.Server != nil || c.Cluster != nil }

// Run runs the scenario's workload once (one round) on env.
func (s Scenario) Run(ctx context.Context, env *Env) { s.run(ctx, env) }

// WhyNot says why the scenario cannot run with caps, or "" if it can.
func (s Scenario) WhyNot(c Caps) string {
	if s.Skip == nil {
		return ""
	}
	return s.Skip(c)
}

// All lists every scenario, in the order `all` runs them: the basic
// workloads, the network ones, the scheduled ones, then those of the
// client-side mutants, clock skew, and the process and server faults.
var All = []Scenario{
	{Name: "race", Calls: 1, ClientCalls: 2.5, Doc: "every client sends the same order at once, with the read-to-write window widened: one owner, the rest 409 or replay", run: runRace},
	{Name: "takeover", Calls: 17, TTLs: 3, Doc: "an owner pauses past LockTTL; others take over; the stale owner's save or release must be fenced", run: runTakeover},
	{Name: "crash", Calls: 9, TTLs: 2, Doc: "an owner crashes after its claim or its work and never cleans up; after LockTTL another takes over", run: runCrash},
	{Name: "error", Calls: 15, Doc: "the work fails (after charging); release-on-error and save-error policies on half the keys each", run: runError},
	{Name: "mismatch", Calls: 7, Doc: "the key is reused with other parameters, during and after the first request: always 422, never run", run: runMismatch},
	{Name: "retention", Calls: 13, Retentions: 2, Doc: "keys are pruned while clients retry inside the retry window: every retry must replay; then a prune meets keys of two ages under the same names in different tenants: the young stay, the old go", Retention: 1200 * time.Millisecond, run: runRetention},
	{Name: "key-space", Calls: 12, run: runKeySpace,
		Doc: "orders whose keys differ only in case, whitespace, tenant, Unicode form, a separator or a byte after a long prefix, new orders whose key, tenant or parameters are a pattern (LIKE, glob) of another's, and a key each order's extends, claimed and released: each keeps its own record (no 422 to its own parameters, no other order's answer, still there after its prefix's release)"},
	{Name: "abuse", Calls: 150, run: runAbuse,
		Doc: "clients break the etiquette: a release after the save, a save sent twice, another key's token, an empty or made-up token: every one fenced, the first answer kept"},
	{Name: "heartbeat", Calls: 47, TTLs: 4, NeedsExtender: true, run: runHeartbeat,
		Doc: "stores that renew leases: slow work extends its claim and is never taken over while it beats; an owner stalled before its first beat is taken over and its late beats and save are fenced"},
	{Name: "network", Calls: 7, TTLs: 8, Doc: "a nemesis switches latency with jitter, connection resets and lost replies on and off between the clients and the server (postgres, redis): unknown outcomes, retried with the same key",
		Needs: netNeeds, Skip: NetSkip, run: runNetwork},
	{Name: "lost-reply", Calls: 7, TTLs: 2, PerKey: 1.5, Doc: "a claim, save or release commits on the server and its reply is lost (postgres, redis); the client retries into the unknown state with the same key",
		Needs: netNeeds, Skip: NetSkip, run: runLostReply},
	{Name: "sched-race", Calls: 10, PerKey: 0.5, Scheduled: true, run: episodes("sched-race"),
		Doc: "scheduled: three clients send the same order while a pruner prunes; the scheduler interleaves their statements (one owner, the rest 409 or replay)"},
	{Name: "sched-takeover", Calls: 12, PerKey: 2, Scheduled: true, run: episodes("sched-takeover"),
		Doc: "scheduled: three clients on one order; the clock moves past LockTTL between steps, work may fail and release, clocks may lag: stale owners must be fenced, tokens never repeat"},
	{Name: "sched-crash", Calls: 7, PerKey: 1.5, Scheduled: true, run: episodes("sched-crash"),
		Doc: "scheduled: the owner crashes after its claim; at LockTTL two clients race for the stale claim: one takes it over, and the key is not stuck; on a manual clock the claim's age lands exactly on LockTTL (stale), one millisecond short (still live: 409, until the clock moves the last millisecond) or one past, by the key"},
	{Name: "sched-mismatch", Calls: 8, PerKey: 0.5, Scheduled: true, run: episodes("sched-mismatch"),
		Doc: "scheduled: a client sends other parameters on a key two others use, while the claim is live, stale, released after a failed work, or being taken over: always 422, never run"},
	{Name: "sched-retention", Calls: 10, PerKey: 2, Scheduled: true, run: episodes("sched-retention"),
		Doc: "scheduled: an order completes, the clock moves, a pruner prunes, the order is retried inside the retention: it must replay; on a manual clock the clock may move to one millisecond short of the record's retention, and key 0 and every third end there with a prune and a retry"},
	{Name: "retry-after-charge", Calls: 5, run: runRetryAfterCharge,
		Doc: "the provider charges but its reply is lost; the client releases its claim (the provider is keyed, as the card's lab) and retries: one charge per order"},
	{Name: "skew", Calls: 8, TTLs: 2, run: runSkew,
		Doc: "a client whose clock runs 2×LockTTL ahead sends the order a healthy owner is working on: caller-clock stores let it take over (finding skew_takeovers) and fence the owner's save; server-clock stores answer 409 (a takeover there is an exclusive-execution violation)"},
	{Name: "workers", Calls: 5, TTLs: 4, Needs: "worker processes", Skip: WorkersSkip, run: runWorkers,
		Doc: "clients run in worker processes that are killed with SIGKILL at failpoints and at random moments: their claims are taken over after LockTTL, never lost, never doubled"},
	{Name: "store-faults", Calls: 4, TTLs: 15, Retention: storeFaultsRetention, Needs: "a server it can pause and restart", Skip: ServerSkip, Alone: always, FaultsServer: true, run: runStoreFaults,
		Doc: "the server is paused, then killed with SIGKILL and restarted, under load: calls during the outage are unknown outcomes; after healing every order is answered and no claim or answer was lost"},
	{Name: "failover", Calls: 10, TTLs: 10, Retention: replicatedRetention, Needs: clusterNeeds, Skip: ClusterSkip, Alone: always, run: runFailover,
		Doc: "replicated stores: the standby falls behind (its link cut) while the primary answers, then the primary is killed or frozen and the harness fails over to the standby: asynchronous replication loses acknowledged claims and answers (the work runs again), synchronous must lose none"},
	{Name: "partition", Calls: 10, TTLs: 14, Retention: replicatedRetention, Needs: clusterNeeds, Skip: ClusterSkip, Alone: always, run: runPartition,
		Doc: "replicated stores: the primary is cut off from the clients and healed, later from its standby (it keeps answering), then isolated, and the harness fails over to the standby: what the cut-off primary acknowledged must not be lost"},
	{Name: "stress", OnRequest: true, Alone: always, Fixed: stressCalibrate + stressWindow, run: runStress,
		Doc: "only when named: the store's capacity is measured, then clients in pairs send the same orders on fresh keys as fast as it answers, every call recorded and checked; findings give the rate and its share of the capacity"},
	{Name: "chaos", Calls: 12, ClientCalls: 1, TTLs: 16, Alone: serverFaults, FaultsServer: true, run: runChaos,
		Doc: "a random mix of every fault (client pauses and crashes, worker kills, server pause and restart, network faults) in Jepsen-style phases: faults on, healed, quiet retries; the schedule is a pure function of the seed"},
}

// storeFaultsRetention is the store-faults scenario's retention: far longer
// than the scenario (so no key it saved may go), because a claim whose
// answer the outage lost may have created the key seconds before the claim
// the history knows, and the checkers start the retention window there: a
// store that forgets a saved answer in the restart (no persistence) must
// be caught by a wide margin, not by a second.
const storeFaultsRetention = 60 * time.Second

// Lookup returns the named scenario.
func Lookup(name string) (Scenario, bool) {
	for _, s := range All {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Names lists the scenarios' names, in order.
func Names() []string {
	out := make([]string, len(All))
	for i, s := range All {
		out[i] = s.Name
	}
	return out
}

// Default lists the scenarios `all` runs, in order: every one but those
// that run only when named (OnRequest).
func Default() []string {
	var out []string
	for _, s := range All {
		if !s.OnRequest {
			out = append(out, s.Name)
		}
	}
	return out
}

// NamesString lists the scenarios' names for messages ("race, takeover, …").
func NamesString() string { return strings.Join(Names(), ", ") }

// IsScheduled reports whether the named scenario runs under the
// controlled scheduler, one episode per key.
func IsScheduled(name string) bool {
	s, ok := Lookup(name)
	return ok && s.Scheduled
}
