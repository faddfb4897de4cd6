package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// Options configure one run of scenarios against one store variant.
type Options struct {
	Backend stores.Backend
	// Variant is the store variant ("correct" or a mutant), or a
	// client-side mutant run on the correct store.
	Variant string
	// Addr is where the backend lives: a directory for SQLite files, a DSN
	// for Postgres, host:port for Redis; memory ignores it.
	Addr      string
	Clients   int
	Keys      int
	Seed      int64
	Duration  time.Duration // run rounds of each scenario until it elapses (0: one round)
	LockTTL   time.Duration
	Retention time.Duration
	// RetentionFixed says the store keeps Retention whatever its
	// stores.Config asks (idemtest.Factory.Retention): every scenario's
	// store then gets the run's Retention, a scenario's own
	// (scenario.Scenario.Retention) included, and is judged by it.
	RetentionFixed bool
	// ProbeWait, if positive, is the longest a scenario's final probe
	// waits for a lease to end on a real clock: past it, the keys a claim
	// may still hold are left out of the probe, their liveness not judged
	// and the scenario's notes saying so (scenario.Env.PlanProbe),
	// instead of waiting a production LockTTL out. idemtest sets it to its
	// wait budget; 0 (the CLI) waits out any LockTTL.
	ProbeWait time.Duration
	Scenarios []string
	// Semantics and Fence are what the store declares beyond the contract
	// (idemtest.Factory): the model and the fencing checker hold it to
	// them.
	Semantics stores.Semantics
	Fence     stores.Fence
	// StrictRetention makes a key kept past its retention a violation
	// (the retention checker), not a finding.
	StrictRetention bool
	// StrictAvailability makes a store that answers contention with
	// errors past check.AvailabilityTolerance a violation (the
	// availability checker), not a finding.
	StrictAvailability bool
	// Count runs the list of scenarios this many times (0 or 1: once).
	// Every run of a scenario (a repetition, or a name listed twice) gets
	// its own store and its own draws from the seed.
	Count int
	// Progress, if set, hears where the run is: when a scenario starts,
	// every ProgressEvery while it runs, and when it ends.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// ScheduledLockTTL, if positive and shorter than LockTTL, is the
	// LockTTL of the scheduled scenarios on a server-clock store: there a
	// tick of the scheduler waits LockTTL out in real time, and a shorter
	// one proves the same (every claim still outlives a statement's few
	// milliseconds by far). DefaultOptions sets ScheduledServerLockTTL;
	// idemtest leaves it 0, as a factory's server may be far slower.
	ScheduledLockTTL time.Duration
	// Parallel is how many scenarios may run at once (0 or 1: one after
	// another). Each has its own store, so a correct store's verdict does
	// not depend on it; the isolated scenarios run alone whatever it is
	// (see Run). DefaultOptions sets DefaultParallel.
	Parallel int
	// OpenStore, if set, opens the store for each scenario instead of
	// Backend.Open: how idemtest runs a store from outside the registry
	// (a factory). OpenAt then opens it at another address, if it can.
	OpenStore func(ctx context.Context, scenario string, cfg stores.Config) (stores.Store, error)
	OpenAt    func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error)
	// Net starts network proxies in front of the server at Addr, for the
	// network, lost-reply and chaos scenarios; nil: those faults skip.
	Net nemesis.Network
	// Server pauses, kills and restarts the server at Addr, for the
	// store-faults and chaos scenarios; nil: those faults skip, and
	// NoServer says why.
	Server   nemesis.Server
	NoServer string
	// OwnServer, if set, starts another server like the one at Addr (a
	// fresh container) for the scenarios that fault the server
	// (scenario.Scenario.FaultsServer): on a server of their own they run
	// beside the shared scenarios instead of alone after every other one,
	// and the run is shorter by their time. nil, an error from it, or
	// Parallel 1: they run alone on the run's server, as before.
	OwnServer func(ctx context.Context) (*OwnedServer, error) `json:"-"`
	// Cluster is the replicated topology of a replicated backend, for the
	// failover and partition scenarios; nil: they skip.
	Cluster nemesis.Cluster
	// Edit, if set, edits one of the store's statements at open
	// (stores.Config.Edit), in this process and in its workers: how
	// `idemcheck mutate` runs a generated mutant.
	Edit *stores.Edit `json:"-"`
	// MaxMemory is the memory a run may hold, in bytes (0: no limit):
	// once the harness holds half of it the run stops as an interrupt
	// stops it, and the histories recorded so far are checked (with the
	// other half) and reported, the limit named (results.Summary.Stopped).
	// A run too large for the machine then reports instead of being
	// killed by the kernel with nothing said.
	MaxMemory uint64
	// Journal, if set, hears every record of the run as it is made
	// (history.Journal): a run whose process dies is judged from it
	// afterwards (Recover). nil: nothing is journaled.
	Journal *history.Journal `json:"-"`
	// SpillDir, if set, is where a scenario's history goes once it holds
	// more than SpillAfter calls (history.History.SpillTo): a run of
	// millions of calls is then held on disk and checked part by part, so
	// that its memory is bounded by its largest part, not by the run. ""
	// keeps every history in memory (and MaxMemory stops a run too large).
	SpillDir string `json:"-"`
	// SpillAfter is how many calls (and answers) a scenario's history
	// holds in memory before the older ones go to SpillDir; 0 is
	// DefaultSpillAfter.
	SpillAfter int `json:"-"`
	// WorkerCommand starts an `idemcheck worker` process (argv), for the
	// scenarios that run clients in processes the harness kills; empty
	// means no worker processes (those scenarios skip, or do without).
	WorkerCommand []string
}

// Progress reports where a run is.
type Progress struct {
	Scenario string
	Index    int // 1-based
	Total    int
	// Skipped says why the scenario did not run (with Done set).
	Skipped string
	// Elapsed is the time since the run started.
	Elapsed time.Duration
	// Ops and Faults count the store calls and injected faults of the
	// current scenario so far.
	Ops    int
	Faults int
	// Violations counts the violations found so far in the whole run
	// (a scenario's are known when it ends).
	Violations int
	// Checking: the scenario's workload has ended, and its final probe
	// and its checkers run (on a run of millions of calls, a minute or
	// more in which the count of calls stands still).
	Checking bool
	Done     bool
}

// DefaultOptions are the parameters `idemcheck check` runs with.
func DefaultOptions() Options {
	return Options{Variant: stores.Correct, Clients: 6, Keys: 8, Seed: 1,
		LockTTL: 250 * time.Millisecond, Retention: 10 * time.Second, Parallel: DefaultParallel,
		ScheduledLockTTL: ScheduledServerLockTTL, MaxMemory: DefaultMaxMemory()}
}

// DefaultSpillAfter is Options.SpillAfter's default: a quarter of a
// million calls, about 90 MB of them, past any run of the default size
// (a full check of 8 keys makes a few thousand) and a small share of the
// largest allowed (MaxClients by MaxKeys: millions).
const DefaultSpillAfter = 1 << 18

// ScheduledServerLockTTL is the LockTTL of scheduled scenarios on
// server-clock stores (Options.ScheduledLockTTL, and the mutant hunts):
// a tick waits it out, so it is short, and still far above a statement's
// few milliseconds.
const ScheduledServerLockTTL = 100 * time.Millisecond

// DefaultParallel is how many scenarios `idemcheck check` runs at once.
// Most of a scenario's time is waits (pauses past LockTTL, retention,
// backoff), not CPU, so four at once fit even a 2-core machine; the
// soak runs them so beside its CPU hogs, and finds no false alarm.
const DefaultParallel = 4

// Limits on the options, so that a typo cannot exhaust the machine: each
// client is a goroutine, each key an order with its history, and every
// store call is kept in memory and written to the results (about 4 KB a
// call). MinLockTTL is the shortest LockTTL the workload can honour: its
// longest work run is 20 ms (the mismatch scenario's owner) and a claim
// must outlast its work plus a save's round trip, with room for a loaded
// machine; below it the correct store would fail by design (the
// lock-shorter-than-work mutant makes that mistake on purpose).
const (
	MaxClients  = 256
	MaxKeys     = 10_000
	MaxCount    = 1_000
	MaxDuration = 24 * time.Hour
	MaxParallel = 64
	MinLockTTL  = 50 * time.Millisecond
	MaxLockTTL  = 10 * time.Minute
	// MinRetention and MaxRetention bound --retention. The retention
	// scenario keeps its own short retention; below a second the other
	// scenarios' pruners and the checkers' Slack would judge little
	// inside it. Above a day a run's records stop being pruned within
	// anything a run does.
	MinRetention = time.Second
	MaxRetention = 24 * time.Hour
)

// Validate reports options no run can use.
func (o Options) Validate() error {
	switch {
	case o.Clients < 1 || o.Clients > MaxClients:
		return fmt.Errorf("--clients must be between 1 and %d, got %d", MaxClients, o.Clients)
	case o.Keys < 1 || o.Keys > MaxKeys:
		return fmt.Errorf("--keys must be between 1 and %d, got %d", MaxKeys, o.Keys)
	case o.Duration < 0 || o.Duration > MaxDuration:
		return fmt.Errorf("--duration must be between 0 and %v, got %v", MaxDuration, o.Duration)
	case o.Parallel < 0 || o.Parallel > MaxParallel:
		return fmt.Errorf("--parallel must be between 1 and %d, got %d", MaxParallel, o.Parallel)
	case o.Count < 0 || o.Count > MaxCount:
		return fmt.Errorf("--count must be between 1 and %d, got %d", MaxCount, o.Count)
	case o.LockTTL > 0 && o.LockTTL < MinLockTTL:
		return fmt.Errorf("--lock-ttl %v is shorter than the workload's own work (up to 20ms, plus a save): "+
			"the correct store would take over healthy owners by design; use at least %v", o.LockTTL, MinLockTTL)
	case o.LockTTL > MaxLockTTL && o.OpenStore == nil:
		// A factory's store (idemtest) may keep a longer lease of its
		// own: the suite skips, saying so, what it cannot wait for.
		return fmt.Errorf("--lock-ttl must be at most %v, got %v", MaxLockTTL, o.LockTTL)
	case o.Retention != 0 && (o.Retention < MinRetention || o.Retention > MaxRetention) && o.OpenStore == nil:
		return fmt.Errorf("--retention must be between %v and %v, got %v", MinRetention, MaxRetention, o.Retention)
	case !o.Backend.HasVariant(o.Variant) && !workload.IsClientMutant(o.Variant):
		return fmt.Errorf("store %s has no variant %q (known: %s; client-side: %s)", o.Backend.Name, o.Variant,
			strings.Join(o.Backend.Variants(), ", "), strings.Join(workload.ClientMutantNames(), ", "))
	}
	for _, s := range o.Scenarios {
		if _, ok := scenario.Lookup(s); !ok {
			return fmt.Errorf("unknown scenario %q (known: %s)", s, scenario.NamesString())
		}
	}
	return stores.Config{LockTTL: o.LockTTL, Retention: o.Retention}.Validate()
}

// Declared is what the store declares beyond the contract: the options'
// Semantics and Fence, or else the backend's.
func (o Options) Declared() (stores.Semantics, stores.Fence) {
	sem, fence := o.Semantics, o.Fence
	if sem == (stores.Semantics{}) {
		sem = o.Backend.Semantics
	}
	if fence == nil {
		fence = o.Backend.Fence
	}
	return sem, fence
}

// Caps is what the run can do besides calling its store, as the
// scenarios' Skip functions read it.
func (o Options) Caps() scenario.Caps {
	sem, _ := o.Declared()
	c := scenario.Caps{Backend: o.Backend, Factory: o.OpenStore != nil, Addr: o.Addr, Semantics: sem,
		Net: o.Net, Server: o.Server, NoServer: o.NoServer, Cluster: o.Cluster, WorkerCommand: o.WorkerCommand, OpenAt: o.OpenAt}
	if o.OpenStore == nil && o.Backend.Open != nil {
		c.OpenAt = o.Backend.Open
	}
	return c
}

// Estimate is a rough forecast of a run's wall time, from each scenario's
// cost in LockTTLs and retention periods (scenario.Scenario.Cost) on an idle
// machine, phase by phase as Run runs them: the shared ones Parallel at a
// time (their sum shared out, but never less than the longest), the
// scheduled ones as many at once as their slots allow
// (Options.scheduledSlots), those that run alone one after another, and
// the server-fault scenarios on a server of their own
// (Options.OwnServer) beside the shared and scheduled ones. Enough to
// warn before a run that will take long.
func (o Options) Estimate() time.Duration {
	sum := make([]time.Duration, scenario.Alone+1)
	longest := make([]time.Duration, scenario.Alone+1)
	caps := o.Caps()
	var own time.Duration      // the lane of the server-fault scenarios, beside the shared and scheduled phases
	var slotCost time.Duration // the scheduled scenarios' costs, each times its share of the phase's slots
	for _, name := range o.Plan() {
		sc, ok := scenario.Lookup(name)
		if !ok || sc.WhyNot(caps) != "" {
			continue
		}
		c := o.ScenarioCost(sc)
		ph := sc.Phase(caps)
		if o.onOwnServer(sc, caps) {
			own += c
			continue
		}
		sum[ph] += c
		longest[ph] = max(longest[ph], c)
		if ph == scenario.Scheduled {
			slotCost += c * time.Duration(o.scheduledSlots(sc))
		}
	}
	parallel := time.Duration(max(o.Parallel, 1))
	shared := max(sum[scenario.Shared]/parallel, longest[scenario.Shared])
	scheduled := max(sum[scenario.Scheduled]/parallel, slotCost/scenario.EpisodesAtOnce, longest[scenario.Scheduled])
	return max(shared+scheduled, own) + sum[scenario.Alone]
}

// EstimateCalls is a rough upper bound on the store calls a run of o
// records: each scenario's measured calls per key and client
// (scenario.Scenario.EstimateCalls), and --duration repeats the rounds.
// Every call is kept in memory until the run ends (BytesPerCall), or on
// disk past SpillAfter (DiskBytesPerCall), so this bounds what a run can
// hold.
func (o Options) EstimateCalls() int64 {
	caps := o.Caps()
	var n int64
	for _, name := range o.Plan() {
		sc, ok := scenario.Lookup(name)
		if !ok || sc.WhyNot(caps) != "" {
			continue
		}
		c := sc.EstimateCalls(o.Keys, o.Clients)
		if o.Duration > 0 {
			round := o
			round.Duration = 0
			if one := round.ScenarioCost(sc); one > 0 {
				c *= max(1, int64(o.Duration/one))
			}
		}
		n += c
	}
	return n
}

// BytesPerCall is the memory a recorded call costs until the run ends
// (its history, checking and report), as measured on the memory store:
// 137,187 calls of race at 1,000 keys and 60 clients peaked at 697 MB.
// A history that spills (Options.SpillDir) holds at most SpillAfter
// calls so, and the rest on disk (DiskBytesPerCall).
const BytesPerCall = 5 << 10

// DiskBytesPerCall is the disk a recorded call takes while a run that
// spills runs (its journal line and its spilled copy), as measured on
// the memory store's race at 256 clients and 10,000 keys.
const DiskBytesPerCall = 2 << 10

// HistoryBytesPerCall is the disk a recorded call takes in the run's
// history.jsonl, written as the run ends (while the journal and any
// spilled history are still there): 97,001,593 bytes for 137,133 calls
// of race at 1,000 keys and 60 clients on the memory store; 4.2 GB for
// 5,889,924 at 10,000 keys and 256 clients (docs/performance.md).
const HistoryBytesPerCall = 710

// ScenarioCost is a rough forecast of one run of sc's wall time under o:
// the longer of its LockTTLs and retention periods
// (scenario.Scenario.Cost at the LockTTL its store gets) and its calls at
// the backend's wall time per call (stores.Backend.CallWall), plus the
// backend's FaultWall when the scenario pauses and restarts its server,
// repeated for Duration. A scheduled scenario on a caller-clock store waits
// for no LockTTL in real time (its clock is a manual one the scheduler
// moves), so its LockTTLs cost next to nothing, but its calls do: a
// drawn SQLite run of 5,364 keys at a 50 ms LockTTL forecast by LockTTLs
// alone at under 10 s ran for 1,122 s.
func (o Options) ScenarioCost(sc scenario.Scenario) time.Duration {
	ttl := o.waitTTL(sc)
	if o.RetentionFixed {
		sc.Retention = 0 // the store keeps the run's, whatever sc asks
	}
	wall := o.Backend.CallWall
	if wall <= 0 {
		wall = stores.DefaultCallWall
	}
	var fixed time.Duration
	if sc.FaultsServer && o.Backend.Lives == stores.Server {
		fixed = o.Backend.FaultWall
	}
	c := fixed + max(sc.Cost(ttl, o.Retention, o.Keys), time.Duration(sc.EstimateCalls(o.Keys, o.Clients))*wall)
	if o.Duration > c {
		c = o.Duration + fixed + sc.Cost(ttl, o.Retention, 0)
	}
	return c
}

// ScenarioWaits is a rough forecast of the time one round of sc waits
// under o for LockTTLs and retention periods to pass in real time (its
// pauses past LockTTL, its final probe's, its retention waits), calls
// aside: what a LockTTL or retention of minutes makes a scenario wait.
// A scheduled scenario on a caller-clock store moves a manual clock and
// waits for none of them.
func (o Options) ScenarioWaits(sc scenario.Scenario) time.Duration {
	if o.RetentionFixed {
		sc.Retention = 0
	}
	ttl := o.waitTTL(sc)
	w := sc.Cost(ttl, o.Retention, o.Keys) - sc.Fixed
	if o.ProbeWait > 0 && ttl > o.ProbeWait {
		w -= ttl // the final probe does not wait (scenario.Setup.ProbeWait)
	}
	return w
}

// waitTTL is the LockTTL sc waits out in real time under o: its store's,
// or next to none for a scheduled scenario on a caller-clock store.
func (o Options) waitTTL(sc scenario.Scenario) time.Duration {
	if sc.Scheduled && o.Backend.Clock != stores.ServerClock {
		return time.Millisecond
	}
	return o.LockTTLFor(sc)
}

// OwnedServer is a server started for the server-fault scenarios alone
// (Options.OwnServer): where it is, its faults, and how to remove it.
type OwnedServer struct {
	Addr   string
	Net    nemesis.Network
	Server nemesis.Server
	// Close stops and removes the server; the run calls it once, when
	// the scenarios on it are done. It may return before the removal
	// ends, when the one who made the server waits for that later.
	Close func()
}

// onOwnServer says whether sc runs on a server of its own, beside the
// shared phase: it is alone only because it faults the run's one server
// (not a cluster), the run can start another (Options.OwnServer), and
// scenarios may run at once (Parallel 1 runs them one after another).
func (o Options) onOwnServer(sc scenario.Scenario, caps scenario.Caps) bool {
	return o.OwnServer != nil && o.Parallel > 1 && faultsItsServer(sc, caps) && sc.Phase(caps) == scenario.Alone
}

// FaultsItsServer says whether sc, run on o, pauses and restarts o's one
// server (not a cluster's): nothing else may use that server meanwhile,
// so it runs on a server of its own (OwnServer) or alone.
func (o Options) FaultsItsServer(sc scenario.Scenario) bool {
	return faultsItsServer(sc, o.Caps())
}

func faultsItsServer(sc scenario.Scenario, caps scenario.Caps) bool {
	return sc.FaultsServer && caps.Server != nil && caps.Cluster == nil && sc.WhyNot(caps) == ""
}

// OwnServersAhead is how many servers of their own (Options.OwnServer)
// a run of o's plan starts at once when its server can be faulted: its
// server-fault scenarios, at most Parallel (none at Parallel 1). A
// caller that starts the run's server may start these beside it, so that
// their start is not on the run's critical path.
func (o Options) OwnServersAhead() int {
	if o.Parallel <= 1 {
		return 0
	}
	n := 0
	for _, name := range o.Plan() {
		if sc, ok := scenario.Lookup(name); ok && sc.FaultsServer {
			n++
		}
	}
	return min(n, o.Parallel)
}

// Plan lists the scenario runs of o in order: the scenarios (all when
// none are named), Count times over.
func (o Options) Plan() []string {
	names := o.Scenarios
	if len(names) == 0 {
		names = scenario.Default()
	}
	var out []string
	for i := 0; i < max(o.Count, 1); i++ {
		out = append(out, names...)
	}
	return out
}
