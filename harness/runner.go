// Package harness is the thin runner: it opens a fresh store for each
// scenario, runs the scenario's workload (harness/scenario) with its
// faults, probes every key once the clients are done, checks the history
// (harness/check) and sums the verdicts up. The parts it joins live in one
// package per role, in the order the data flows:
//
//	workload → nemesis (faults) → history → check → report
//
// with scenario tying a workload to its faults, worker running clients in
// processes, hunt hunting mutants, and servers providing Postgres and
// Redis. Producers never import consumers, nor the reverse.
package harness

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/internal/pool"
	"github.com/idemcheck/idemcheck/models"
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
	Scenarios []string
	// Semantics and Fence are what the store declares beyond the contract
	// (idemtest.Factory): the model and the fencing checker hold it to
	// them.
	Semantics stores.Semantics
	Fence     stores.Fence
	// StrictRetention makes a key kept past its retention a violation
	// (the retention checker), not a finding.
	StrictRetention bool
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
	// Statements, if set, edits the store's statements at open
	// (stores.Config.Statements): how `idemcheck mutate` runs a generated
	// mutant. It does not cross into worker processes, so a run that sets
	// it leaves WorkerCommand empty.
	Statements func(name, text string) string `json:"-"`
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
	Done       bool
}

// DefaultOptions are the parameters `idemcheck check` runs with.
func DefaultOptions() Options {
	return Options{Variant: stores.Correct, Clients: 6, Keys: 8, Seed: 1,
		LockTTL: 250 * time.Millisecond, Retention: 10 * time.Second, Parallel: DefaultParallel,
		ScheduledLockTTL: ScheduledServerLockTTL}
}

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
	case o.LockTTL > MaxLockTTL:
		return fmt.Errorf("--lock-ttl must be at most %v, got %v", MaxLockTTL, o.LockTTL)
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

// ScenarioResult is one scenario's outcome and what it measured.
type ScenarioResult struct {
	Name string `json:"name"`
	// Repetition numbers the runs of the same scenario in one run (--count,
	// or the name listed twice): 0 for the first.
	Repetition int `json:"repetition,omitempty"`
	// Doc says in a line what the scenario does (scenario.Scenario.Doc).
	Doc string `json:"doc"`
	// Retention is the scenario's store's retention (the run's, or the
	// scenario's own).
	Retention string `json:"retention,omitempty"`
	// LockTTL is the scenario's store's LockTTL: the run's, or for the
	// scheduled scenarios on a server-clock store Options.ScheduledLockTTL.
	LockTTL string `json:"lock_ttl,omitempty"`
	// OwnServer says the scenario ran on a server started for it
	// (Options.OwnServer), beside the shared scenarios.
	OwnServer bool          `json:"own_server,omitempty"`
	Verdict   check.Verdict `json:"verdict"`
	Ops       int           `json:"ops"` // store calls
	Rounds    int           `json:"rounds"`
	Clients   int           `json:"clients"` // clients that took part
	Keys      int           `json:"keys"`
	// MaxConcurrentBegins is the most Begin calls in flight at once on one
	// key: proof the scenario raced for real.
	MaxConcurrentBegins int               `json:"max_concurrent_begins"`
	WorkRuns            int               `json:"work_runs"`
	Charges             int               `json:"charges"`
	Faults              map[string]int    `json:"faults"`
	Outcomes            map[string]int    `json:"outcomes"`
	Seconds             float64           `json:"seconds"`
	Checkers            []check.Result    `json:"checkers"`
	Violations          []check.Violation `json:"violations"`
	Error               string            `json:"error,omitempty"`

	// Skipped says why the scenario did not run (its verdict is "skipped").
	Skipped string `json:"skipped,omitempty"`
	// Findings counts expected effects a scenario measures that are not
	// violations, e.g. skew_takeovers: healthy owners taken over by a
	// client whose clock runs ahead, which caller-clock stores allow.
	Findings map[string]int `json:"findings,omitempty"`
	// Schedule lists the faults the scenario planned, in order: a pure
	// function of the seed, so a failing run can be replayed.
	Schedule []string `json:"schedule,omitempty"`
	// Check is what the checkers judged the history by (nil if the
	// scenario did not run): with history.jsonl, enough to re-check it.
	Check *check.Params `json:"check,omitempty"`
	// Episodes records each scheduled episode's choices, so `idemcheck
	// replay` can run it again on the same interleaving.
	Episodes []scenario.EpisodeRecord `json:"episodes,omitempty"`

	hist   *history.History
	ledger *history.Ledger
	fence  stores.Fence
}

// History returns the scenario's recorded history (nil if it was skipped).
func (r *ScenarioResult) History() *history.History { return r.hist }

// Ledger returns the scenario's payment-provider ledger: every charge the
// work made, for reports that show a key's charges.
func (r *ScenarioResult) Ledger() *history.Ledger { return r.ledger }

// Linearization returns what the linearizability checker kept for a page
// of porcupine's visualisation of the scenario's history (nil if it kept
// none): report.WriteLinearization draws it.
func (r *ScenarioResult) Linearization() *check.Linearization {
	for _, c := range r.Checkers {
		if c.Linearization != nil {
			return c.Linearization
		}
	}
	return nil
}

// Summary is a whole run's outcome: what `--json` prints.
type Summary struct {
	Verdict    check.Verdict     `json:"verdict"`
	Store      string            `json:"store"`
	Variant    string            `json:"variant"`
	Seed       int64             `json:"seed"`
	Clients    int               `json:"clients"`
	Keys       int               `json:"keys"`
	LockTTL    string            `json:"lock_ttl"`
	Started    time.Time         `json:"started"`
	Seconds    float64           `json:"seconds"`
	Scenarios  []ScenarioResult  `json:"scenarios"`
	Violations []check.Violation `json:"violations"`
	Dir        string            `json:"results_dir,omitempty"`
	// Ended is when the run ended; Interrupted says it was cut short
	// (Ctrl-C, SIGTERM), and NotRun lists the scenarios it never started.
	Ended       time.Time `json:"ended"`
	Interrupted bool      `json:"interrupted"`
	NotRun      []string  `json:"not_run,omitempty"`
	// OwnServerError says why the server-fault scenarios could not have a
	// server of their own (Options.OwnServer failed): they ran alone on
	// the run's server instead.
	OwnServerError string `json:"own_server_error,omitempty"`
	// Provenance says where the run came from: the command line, the
	// program's version and commit, the Go version (set by the caller,
	// see harness.Build).
	Argv      []string `json:"argv,omitempty"`
	Version   string   `json:"version,omitempty"`
	Commit    string   `json:"commit,omitempty"`
	GoVersion string   `json:"go_version,omitempty"`
}

// Estimate is a rough forecast of a run's wall time, from each scenario's
// cost in LockTTLs and retention periods (scenario.Scenario.Cost) on an idle
// machine, phase by phase as Run runs them: the shared ones Parallel at a
// time (their sum shared out, but never less than the longest), the others
// one after another, and the server-fault scenarios on a server of their
// own (Options.OwnServer) beside the shared ones. Enough to warn before a
// run that will take long.
func (o Options) Estimate() time.Duration {
	sum := make([]time.Duration, scenario.Alone+1)
	longest := make([]time.Duration, scenario.Alone+1)
	caps := o.Caps()
	var own time.Duration // the lane of the server-fault scenarios, beside the shared phase
	for _, name := range o.Plan() {
		sc, ok := scenario.Lookup(name)
		if !ok || sc.WhyNot(caps) != "" {
			continue
		}
		c := sc.Cost(o.LockTTL, o.Retention, o.Keys)
		if o.Duration > c {
			c = o.Duration + sc.Cost(o.LockTTL, o.Retention, 0)
		}
		ph := sc.Phase(caps)
		if o.onOwnServer(sc, caps) {
			own += c
			continue
		}
		sum[ph] += c
		longest[ph] = max(longest[ph], c)
	}
	d := sum[scenario.Scheduled] + sum[scenario.Alone]
	d += max(sum[scenario.Shared]/time.Duration(max(o.Parallel, 1)), longest[scenario.Shared], own)
	return d
}

// OwnedServer is a server started for the server-fault scenarios alone
// (Options.OwnServer): where it is, its faults, and how to remove it.
type OwnedServer struct {
	Addr   string
	Net    nemesis.Network
	Server nemesis.Server
	// Close stops and removes the server; the run calls it once, when
	// the scenarios on it are done.
	Close func()
}

// onOwnServer says whether sc runs on a server of its own, beside the
// shared phase: it is alone only because it faults the run's one server
// (not a cluster), the run can start another (Options.OwnServer), and
// scenarios may run at once (Parallel 1 runs them one after another).
func (o Options) onOwnServer(sc scenario.Scenario, caps scenario.Caps) bool {
	return o.OwnServer != nil && o.Parallel > 1 && caps.Server != nil && caps.Cluster == nil &&
		sc.FaultsServer && sc.Phase(caps) == scenario.Alone && sc.WhyNot(caps) == ""
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

// Run runs the scenarios, each on a fresh store, and checks each, in the
// phases of scenario.Phase: first the shared ones, up to Parallel at once
// (each has its own store, clients, proxy and worker processes); then the
// scheduled ones one at a time (each runs its keys' episodes at once on a
// server store; five such scenarios at once made clients wait 15 s inside
// a Postgres soaked at load 30); then those that must run alone (they
// pause or restart the server the others use). With Options.OwnServer,
// the scenarios that fault the server run instead each on a server of its
// own, beside the shared phase, and the scheduled phase waits for them.
// The summary lists the results in plan order whatever order they
// finished in. An error means the run could not be set up (a store could
// not be opened); violations are in the summary, not errors.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	names := o.Plan()
	sum := &Summary{Store: o.Backend.Name, Variant: o.Variant, Seed: o.Seed, Clients: o.Clients, Keys: o.Keys,
		LockTTL: o.LockTTL.String(), Started: time.Now(), Violations: []check.Violation{}}
	runID := NewRunID()
	caps := o.Caps()
	slots := make([]slot, len(names))
	reps := map[string]int{}
	phases := make([][]int, scenario.Alone+1)
	for i, name := range names {
		sc, _ := scenario.Lookup(name)
		slots[i] = slot{sc: sc, rep: reps[name]}
		reps[name]++
		ph := sc.Phase(caps)
		if sc.WhyNot(caps) != "" {
			ph = scenario.Shared // skipped at once
		}
		phases[ph] = append(phases[ph], i)
	}
	// The longest start first, so that the last to finish is not a long
	// one started late (a scenario's estimated cost).
	for _, ph := range phases[:scenario.Alone] {
		sort.SliceStable(ph, func(a, b int) bool { return slots[ph[a]].cost(o) > slots[ph[b]].cost(o) })
	}
	// The scenarios that fault the server move each to a server of its
	// own, when the run can start one: there they run beside the shared
	// phase (they pause the server, not the machine).
	var own, rest []int
	for _, i := range phases[scenario.Alone] {
		if o.onOwnServer(slots[i].sc, caps) {
			own = append(own, i)
		} else {
			rest = append(rest, i)
		}
	}
	phases[scenario.Alone] = rest
	pr := &progressOf{o: o, total: len(names), started: sum.Started}
	runOne := func(o Options, i int, onOwn bool) error {
		caps := o.Caps()
		sl := &slots[i]
		if ctx.Err() != nil {
			return nil // not run
		}
		sl.ran = true
		report := pr.reporter(sl.sc.Name)
		if why := sl.sc.WhyNot(caps); why != "" {
			sl.res = &ScenarioResult{Name: sl.sc.Name, Doc: sl.sc.Doc, Repetition: sl.rep, Verdict: check.Skipped, Skipped: why,
				Faults: map[string]int{}, Outcomes: map[string]int{}, Checkers: []check.Result{}, Violations: []check.Violation{}}
			report(Progress{Skipped: why, Done: true})
			return nil
		}
		res, err := RunScenario(ctx, o, sl.sc, runID, i, sl.rep, report)
		if err != nil {
			return err
		}
		res.OwnServer = onOwn
		sl.res = res
		report(Progress{Ops: res.Ops, Faults: sumFaults(res.Faults), Violations: len(res.Violations), Done: true})
		return nil
	}
	// ownDone gives the error of the server-fault scenarios once they
	// have all finished, each on a server of its own, up to Parallel at
	// once; one whose server cannot start goes back to the Alone phase.
	ownDone := make(chan error, 1)
	go func() {
		var mu sync.Mutex
		var back []int
		err := pool.Each(len(own), max(o.Parallel, 1), func(j int) error {
			srv, err := o.OwnServer(ctx)
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				sum.OwnServerError = err.Error()
				back = append(back, own[j])
				return nil
			}
			defer srv.Close()
			oo := o
			oo.Addr, oo.Net, oo.Server, oo.NoServer = srv.Addr, srv.Net, srv.Server, ""
			return runOne(oo, own[j], true)
		})
		slices.Sort(back)
		phases[scenario.Alone] = append(back, phases[scenario.Alone]...)
		ownDone <- err
	}()
	for ph := range phases {
		idx := phases[ph]
		n := max(o.Parallel, 1)
		if scenario.Phase(ph) != scenario.Shared {
			n = 1
		}
		err := pool.Each(len(idx), n, func(j int) error { return runOne(o, idx[j], false) })
		if scenario.Phase(ph) == scenario.Shared {
			// The lane ends before the scheduled phase, which runs apart
			// from everything else.
			if lerr := <-ownDone; err == nil {
				err = lerr
			}
		}
		if err != nil {
			return nil, err
		}
	}
	for i, sl := range slots {
		if !sl.ran {
			sum.NotRun = append(sum.NotRun, names[i])
			continue
		}
		sum.Scenarios = append(sum.Scenarios, *sl.res)
		sum.Violations = append(sum.Violations, sl.res.Violations...)
	}
	sum.Ended = time.Now()
	sum.Seconds = sum.Ended.Sub(sum.Started).Seconds()
	sum.Verdict = overall(sum.Scenarios)
	if ctx.Err() != nil {
		sum.Interrupted = true
		if sum.Verdict == check.Pass {
			sum.Verdict = check.Unknown
		}
	}
	return sum, nil
}

// slot is one scenario run of a plan: what runs, and what it gave.
type slot struct {
	sc  scenario.Scenario
	rep int
	ran bool // started (or skipped); false: the run was interrupted first
	res *ScenarioResult
}

func (s slot) cost(o Options) time.Duration { return s.sc.Cost(o.LockTTL, o.Retention, o.Keys) }

// progressOf turns the reports of scenarios that may run at once into one
// stream of Progress: Index counts the scenarios finished (plus the one
// reporting, until it is done), Violations the violations found so far.
type progressOf struct {
	o       Options
	total   int
	started time.Time

	mu         sync.Mutex
	done       int
	violations int
}

func (p *progressOf) reporter(name string) func(Progress) {
	if p.o.Progress == nil {
		return func(Progress) {}
	}
	return func(r Progress) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.Done {
			p.done++
			p.violations += r.Violations
			r.Index, r.Violations = p.done, p.violations
		} else {
			r.Index, r.Violations = min(p.done+1, p.total), p.violations
		}
		r.Scenario, r.Total, r.Elapsed = name, p.total, time.Since(p.started)
		p.o.Progress(r)
	}
}

func sumFaults(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func overall(rs []ScenarioResult) check.Verdict {
	v := check.Pass
	for _, r := range rs {
		switch r.Verdict {
		case check.Fail:
			return check.Fail
		case check.Unknown:
			v = check.Unknown
		}
	}
	return v
}

var runSeq atomic.Int64

// NewRunID names a run's stores (SQLite files, Postgres schemas, Redis
// prefixes) apart from every other run's: the clock, and a sequence for
// runs started in the same microsecond by one process.
func NewRunID() int64 {
	return (time.Now().UnixNano()/1000)%1_000_000_000 + runSeq.Add(1)*1_000_000_000
}

// Namespace is the namespace of one store of a run: the Postgres schema
// or Redis key prefix that isolates it (stores.Config.Namespace). space
// names the store within the run (a scenario and its place in the run).
// Worker processes open the same one.
func Namespace(runID int64, space string) string {
	return fmt.Sprintf("idem_%d_%s", runID, strings.ReplaceAll(space, "-", "_"))
}

// Open opens a fresh store of the run's backend, named space within the
// run: its own SQLite file, Postgres schema or Redis key prefix
// (cfg.Namespace is set here). It returns the store, its configuration
// and the address it lives at.
func (o Options) Open(ctx context.Context, space string, runID int64, cfg stores.Config) (stores.Store, stores.Config, string, error) {
	cfg.Namespace = Namespace(runID, space)
	addr := o.StoreAddr(space, runID)
	var st stores.Store
	var err error
	if o.OpenStore != nil {
		st, err = o.OpenStore(ctx, space, cfg)
	} else {
		st, err = o.Backend.Open(ctx, addr, cfg)
	}
	return st, cfg, addr, err
}

// StoreAddr is where the store named space lives: its own SQLite file, or
// the server's address. Worker processes open the same.
func (o Options) StoreAddr(space string, runID int64) string {
	if o.Backend.Lives == stores.File {
		return filepath.Join(o.Addr, fmt.Sprintf("%d-%s.db", runID, space))
	}
	return o.Addr
}

// StoreConfig is the configuration a scenario's store opens with.
func (o Options) StoreConfig(sc scenario.Scenario) stores.Config {
	cfg := stores.Config{LockTTL: o.LockTTL, Retention: o.Retention, Variant: workload.StoreVariant(o.Variant), Statements: o.Statements}
	if sc.Retention > 0 {
		cfg.Retention = sc.Retention
	}
	if sc.Scheduled && o.Backend.Clock == stores.ServerClock && o.ScheduledLockTTL > 0 && o.ScheduledLockTTL < cfg.LockTTL {
		cfg.LockTTL = o.ScheduledLockTTL
	}
	return cfg
}

// NewEnv opens a fresh store for the scenario, named space within the run,
// and makes its Env; randSeed seeds the Env's PRNG. Close the Env's store
// when done.
func (o Options) NewEnv(ctx context.Context, sc scenario.Scenario, space string, runID, randSeed int64) (*scenario.Env, error) {
	if o.Server != nil {
		// A server an earlier scenario restarted may still be coming up
		// on a loaded machine: every scenario starts on a server that
		// answers, with no fault left on.
		if err := o.Server.Heal(ctx); err != nil {
			return nil, fmt.Errorf("%s server before %s: %w", o.Server.Kind(), sc.Name, err)
		}
	}
	st, cfg, addr, err := o.Open(ctx, space, runID, o.StoreConfig(sc))
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", o.Backend.Name, err)
	}
	return scenario.NewEnv(scenario.Setup{Caps: o.Caps(), Name: sc.Name, Store: st, Config: cfg, Addr: addr, Variant: o.Variant,
		Clients: o.Clients, Keys: o.Keys, Seed: o.Seed, RandSeed: randSeed}), nil
}

// LinTimeout is porcupine's budget per scenario: past it, linearizability
// is undecided (never a pass). It guards against a history whose search
// blows up, not against a long one: a Redis chaos history of 5,797 calls on
// 788 keys, each key a few calls beside 120 to 140 Prunes and six unknown
// outcomes, took 29 CPU-seconds at about 37 ms a key, and 20 s left it
// undecided on a loaded machine.
const LinTimeout = 60 * time.Second

// ScenarioSeed seeds the PRNG of one run of a scenario: a function of the
// run's seed, the scenario's name and its repetition only, so a scenario
// failing inside `--scenario all` fails the same way alone with the same
// seed.
func ScenarioSeed(seed int64, name string, rep int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", seed, name, rep)
	return int64(h.Sum64() >> 1)
}

// RunScenario runs one scenario (its rounds) on a fresh store, probes its
// keys, and checks its history. index is its place in the run (it names
// its store) and rep its repetition (it seeds its PRNG, with the seed).
func RunScenario(ctx context.Context, o Options, sc scenario.Scenario, runID int64, index, rep int, report func(Progress)) (*ScenarioResult, error) {
	env, err := o.NewEnv(ctx, sc, fmt.Sprintf("%s_%d", sc.Name, index), runID, ScenarioSeed(o.Seed, sc.Name, rep))
	if err != nil {
		return nil, err
	}
	defer env.Store.Close()
	start := time.Now()
	report(Progress{})
	stopTicker := scenario.Every(context.Background(), o.ProgressEvery, func() {
		report(Progress{Ops: env.Hist.OpCount(), Faults: env.Hist.FaultCount()})
	})
	defer stopTicker()
	stopWatch := history.WatchStalls(env.Hist)
	rounds := 0
	for {
		env.SetRound(rounds)
		sc.Run(ctx, env)
		rounds++
		if o.Duration <= 0 || time.Since(start) >= o.Duration || ctx.Err() != nil {
			break
		}
	}
	if why := env.Skipped(); why != "" {
		stopWatch()
		return &ScenarioResult{Name: sc.Name, Doc: sc.Doc, Repetition: rep, Verdict: check.Skipped, Skipped: why,
			Faults: map[string]int{}, Outcomes: map[string]int{}, Checkers: []check.Result{}, Violations: []check.Violation{}}, nil
	}
	probe := env.NewClientID()
	env.ProbeAfterLockTTL(ctx, probe)
	stopWatch()
	res := &ScenarioResult{Name: sc.Name, Doc: sc.Doc, Repetition: rep, Rounds: rounds, Retention: env.Config.Retention.String(), LockTTL: env.Config.LockTTL.String(), hist: env.Hist, ledger: env.Ledger}
	res.Schedule = env.Schedule()
	res.Episodes = env.Episodes()
	sem, fence := o.Declared()
	m := check.ModelFor(o.Backend.Clock, env.Config, sem)
	res.Check = &check.Params{LockTTL: m.LockTTL, Retention: m.Retention, Slack: m.Slack, ProbeClient: probe,
		LeakProbe: env.LeakProbe(), StrictRetention: o.StrictRetention, Semantics: sem}
	res.fence = fence
	res.judge(true)
	if ctx.Err() != nil && res.Verdict == check.Pass {
		res.Verdict, res.Error = check.Unknown, "interrupted: "+ctx.Err().Error()
	}
	// Why the workload could not finish is said whatever the verdict: an
	// undecided checker (no probe ran) must not hide the reason.
	if inc := env.Incomplete(); len(inc) > 0 {
		if res.Verdict == check.Pass {
			res.Verdict = check.Unknown
		}
		msg := "workload incomplete: " + strings.Join(inc, "; ")
		if res.Error != "" {
			msg = res.Error + "; " + msg
		}
		res.Error = msg
	}
	res.Seconds = time.Since(start).Seconds()
	measure(res, env)
	return res, nil
}

// judge runs the checkers on the result's history with its Check params
// and sets its checkers, violations and verdict; keep asks the checkers to
// keep what a page of porcupine's visualisation needs.
func (r *ScenarioResult) judge(keep bool) {
	r.Checkers = check.Run(check.Evidence{Hist: r.hist, Ledger: r.ledger, Model: r.Check.Model(),
		ProbeClient: r.Check.ProbeClient, LeakProbe: r.Check.LeakProbe, StrictRetention: r.Check.StrictRetention,
		Fence: r.fence, LinTimeout: LinTimeout, Keep: keep})
	r.Violations = []check.Violation{}
	r.Verdict = check.Pass
	for _, c := range r.Checkers {
		r.Violations = append(r.Violations, c.Violations...)
		switch {
		case c.Verdict == check.Fail:
			r.Verdict = check.Fail
		case c.Verdict == check.Unknown && r.Verdict == check.Pass:
			r.Verdict = check.Unknown
		}
	}
}

// measure fills in the counts the summary shows.
func measure(res *ScenarioResult, env *scenario.Env) {
	ops := env.Hist.Ops()
	res.Ops = len(ops)
	res.Faults = map[string]int{}
	for _, f := range env.Hist.Faults() {
		res.Faults[string(f.Kind)]++
	}
	for k, n := range env.Counted() {
		res.Faults[k] += n
	}
	res.Findings = env.Findings()
	res.Outcomes = map[string]int{}
	clients := map[int]bool{}
	keys := map[stores.KeyRef]bool{}
	type edge struct {
		t     int64
		delta int
	}
	edges := map[stores.KeyRef][]edge{}
	for _, op := range ops {
		clients[op.Client] = true
		if op.Input.Kind == models.Prune {
			res.Outcomes["prune"]++
			continue
		}
		keys[op.Input.Key] = true
		switch {
		case op.Output.Unknown:
			res.Outcomes["unknown"]++
		case op.Input.Kind == models.Begin:
			res.Outcomes[op.Output.Decision.Outcome.String()]++
			edges[op.Input.Key] = append(edges[op.Input.Key], edge{op.Call, 1}, edge{op.Return, -1})
		case op.Output.Fenced:
			res.Outcomes["fenced"]++
		default:
			res.Outcomes[map[models.Kind]string{models.Complete: "completed", models.Release: "released"}[op.Input.Kind]]++
		}
	}
	for _, es := range edges {
		sort.Slice(es, func(i, j int) bool {
			if es[i].t != es[j].t {
				return es[i].t < es[j].t
			}
			return es[i].delta > es[j].delta
		})
		n := 0
		for _, e := range es {
			n += e.delta
			if n > res.MaxConcurrentBegins {
				res.MaxConcurrentBegins = n
			}
		}
	}
	res.Clients, res.Keys = len(clients), len(keys)
	res.WorkRuns = len(env.Hist.Work())
	res.Charges = len(env.Ledger.Charges())
}
