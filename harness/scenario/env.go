package scenario

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/worker"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// Setup is what an Env is made from: the store it drives and the run's
// parameters and capabilities.
type Setup struct {
	Caps
	// Name is the scenario's name: it picks which members of the
	// adversarial key families the scenario's orders use (workload.KeyFor).
	Name string
	// Store is the scenario's store, fresh and empty; Config is how it
	// was opened (its namespace included).
	Store  stores.Store
	Config stores.Config
	// Addr is where this scenario's store lives (its own SQLite file, the
	// server's address); it overrides Caps.Addr, which names the run's.
	Addr string
	// Variant is the run's variant: a store variant, or a client-side
	// mutant (workload.ClientMutants) that the Env's clients apply.
	Variant string
	Clients int
	Keys    int
	Seed    int64
	// RandSeed seeds the Env's PRNG (client seeds, jitter, episode
	// choosers).
	RandSeed int64
	// ProbeWait, if positive, is the longest the final probe may wait
	// for a lease to end on a real clock: past it, the keys a claim may
	// still hold are left out of the probe (Env.PlanProbe), not waited
	// for. 0: the probe waits out any LockTTL.
	ProbeWait time.Duration
}

// Env is what a scenario runs with: the store, the history and ledger it
// records into, and the run's parameters. Its methods make clients and
// orders and record what the scenario planned; they are safe for
// concurrent use by the scenario's goroutines.
type Env struct {
	Store  stores.Store
	Config stores.Config
	Hist   *history.History
	Ledger *history.Ledger
	// Clients and Keys are the run's --clients and --keys.
	Clients int
	Keys    int
	Seed    int64
	// Tenant scopes the current round's keys; Round numbers the rounds
	// (a scenario repeated by --duration runs one per round).
	Tenant string
	Round  int

	setup  Setup
	rand   *rand.Rand
	clock  faults.Clock
	nextID int
	mu     sync.Mutex

	incomplete []string          // why the workload could not finish, if it could not
	untested   []string          // what the workload meant to test and did not (NotTested)
	untestedBy []untestedAt      // each of untested's format and round
	schedule   []string          // the fault schedule, printed with the result
	counted    map[string]int    // faults counted, not recorded one by one
	findings   map[string]int    // expected effects that are not violations
	means      map[string][2]int // levels found once a round (FindingMean): sum, rounds
	episodes   []EpisodeRecord
	leakProbe  *int // the leak probes' client id, if the scenario sent any
	deaths     int  // deaths on their own of the processes of stores closed before the end (keepDeaths)
	firstDeath string
	// unprobed are the keys the final probe leaves out (PlanProbe), and
	// planned whether PlanProbe ran.
	unprobed []stores.KeyRef
	planned  bool
	skipped  string
	// Observe, when set, is given to every scheduler the Env makes
	// (sched.Scheduler.Observe): a demo reads the key's row between steps.
	Observe func() string
	// unticked measures an episode's real time between the clock's ticks
	// on a server-clock store (see untickedClock); nil elsewhere.
	unticked *untickedClock
	// parent is the scenario's Env when this one is an episode's (see
	// episodeEnv): what the scenario records (notes, failures, counts,
	// findings, probes, skips) goes to the parent.
	parent *Env
}

// root is the Env that holds what the scenario records: the parent of an
// episode's Env, else the Env itself.
func (e *Env) root() *Env {
	if e.parent != nil {
		return e.parent
	}
	return e
}

// episodeEnv is an Env for one episode run beside others: the same store,
// history, ledger, clock and parameters, with its own client ids (from
// firstID) and its own PRNG (from seed), so that episodes running at once
// hand out the ids and client seeds they would one at a time, whatever
// the goroutines' order.
func (e *Env) episodeEnv(firstID int, seed int64) *Env {
	return &Env{Store: e.Store, Config: e.Config, Hist: e.Hist, Ledger: e.Ledger,
		Clients: e.Clients, Keys: e.Keys, Seed: e.Seed, Tenant: e.Tenant, Round: e.Round,
		setup: e.setup, rand: rand.New(rand.NewSource(seed)), clock: e.clock, nextID: firstID,
		Observe: e.Observe, parent: e}
}

// NewEnv makes the Env of one scenario, with an empty history and ledger.
func NewEnv(s Setup) *Env {
	addr := s.Addr
	if addr == "" {
		addr = s.Caps.Addr
	}
	s.Addr = addr
	return &Env{Store: s.Store, Config: s.Config, Hist: history.New(), Ledger: history.NewLedger(),
		Clients: s.Clients, Keys: s.Keys, Seed: s.Seed, Tenant: "t0",
		setup: s, rand: rand.New(rand.NewSource(s.RandSeed)), clock: faults.RealClock{}}
}

// SetRound starts round n: its keys are scoped by the tenant t<n>.
func (e *Env) SetRound(n int) {
	e.Round, e.Tenant = n, fmt.Sprintf("t%d", n)
}

// Backend is the store's backend.
func (e *Env) Backend() stores.Backend { return e.setup.Backend }

// Addr is where the scenario's store lives (its SQLite file, the
// server's address): worker processes and proxies open the same.
func (e *Env) Addr() string { return e.setup.Addr }

// Caps is what the run can do besides calling the store.
func (e *Env) Caps() Caps { return e.setup.Caps }

// Clock is the clients' clock: the real one, or a manual clock that the
// scheduled scenarios move.
func (e *Env) Clock() faults.Clock { return e.clock }

// ServerClock reports whether the store judges by its server's clock.
func (e *Env) ServerClock() bool { return e.setup.Backend.Clock == stores.ServerClock }

// Order makes the i-th order of the round (fingerprint variant v: ""
// for the order's own parameters, else other parameters on the same key).
// Its key comes from the adversarial key space (workload.KeyFor): orders
// of one round have keys that differ only in case, whitespace, tenant,
// Unicode normalisation or bytes after a long prefix.
//
// Odd orders' answers carry a tail a careless store loses (see tail).
//
// Orders come in twins: 2j and 2j+1 have the same parameters (so the
// same fingerprint) under neighbouring keys, most often in one tenant, as
// two identical charges by two customers of one merchant. They are two
// operations, and each must run once: a store that finds a record by its
// parameters, or by its tenant alone, answers the second twin with the
// first one's answer (Postgres's replay read without its key condition
// survived every scenario while each order's parameters were its own).
// Neighbours, so that a round of two keys has a pair.
func (e *Env) Order(i int, v string) workload.Order {
	amount := 1000 + 7*twin(i)
	id := fmt.Sprintf("o%03d", i)
	return workload.Order{ID: id, Key: workload.KeyFor(e.Tenant, i, workload.KeyOffset(e.setup.Name)),
		Fingerprint: fmt.Sprintf("amount=%d%s", amount, v), Amount: amount, Tail: tail(i)}
}

// OtherAmount is order i with another amount, and so another
// fingerprint, under the same key: the most common reuse of a key with
// other parameters (a retry whose amount changed). A store that
// normalises the amount's value out of its fingerprint replays the first
// answer to it; "other parameters" made only by a suffix (&currency=eur)
// left that store passing every scenario.
func (e *Env) OtherAmount(i int) workload.Order {
	o := e.Order(i, "")
	o.Amount++
	o.Fingerprint = fmt.Sprintf("amount=%d", o.Amount)
	return o
}

// tail is order i's answer's tail (workload.Order.Tail): every odd order's
// answer carries text a careless store loses, quotes, a backslash, an
// emoji, CRLF and blanks (1, 5, 9, …) or 301 characters (3, 7, …), so a
// round of two keys has one; even orders' answers are plain (the demo's
// order 0 among them).
func tail(i int) string {
	if i%2 == 0 {
		return ""
	}
	return workload.Tails[i/2%len(workload.Tails)]
}

// twin is the index whose parameters order i has (see Order).
func twin(i int) int { return i / 2 }

// NewClientID hands out the next client id (worker processes, pruners and
// probes get theirs from the same sequence).
func (e *Env) NewClientID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := e.nextID
	e.nextID++
	return id
}

// nextClientID is the id NewClientID would hand out next.
func (e *Env) nextClientID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nextID
}

// SkipClientIDs makes the next client id at least id: a replay gives its
// clients the ids the recorded run gave them.
func (e *Env) SkipClientIDs(id int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextID = max(e.nextID, id)
}

// Recorder wraps the store for client id, recording into the history.
func (e *Env) Recorder(id int, st stores.Store, clk faults.Clock) *history.Recorder {
	return &history.Recorder{Store: st, Client: id, Hist: e.Hist, Clock: clk}
}

// NewClient makes a client with the default retry policy and the given
// failpoint rules. Client ids are handed out in order. The run's
// client-side mutant, if any, is applied last.
func (e *Env) NewClient(rules ...workload.Rule) *workload.Client {
	id := e.NewClientID()
	e.mu.Lock()
	seed := e.rand.Int63()
	e.mu.Unlock()
	c := &workload.Client{
		ID: id, Clock: e.clock, Hist: e.Hist, Ledger: e.Ledger,
		Store:           e.Recorder(id, e.Store, e.clock),
		Faults:          workload.NewPlan(e.Hist, rules...).For(id),
		Keys:            workload.SameKey,
		DownstreamKeyed: true,
		MaxAttempts:     25,
		Backoff:         10 * time.Millisecond,
		MaxBackoff:      e.Config.LockTTL / 3,
		WorkTime:        3 * time.Millisecond,
		Rand:            workload.NewRand(seed),
	}
	e.ApplyWorkload(c)
	return c
}

// ApplyWorkload gives the client the run's client-side mutant, if any.
// NewClient calls it; a scenario that changes a client's options after
// NewClient calls it again, so the mutant's mistake is the one that stays.
func (e *Env) ApplyWorkload(c *workload.Client) {
	if m, ok := workload.LookupClientMutant(e.setup.Variant); ok {
		m.Apply(c, e.Config.LockTTL)
	}
}

// Jitter returns a random duration in [0, d].
func (e *Env) Jitter(d time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Duration(e.rand.Int63n(int64(d) + 1))
}

// Int63 draws from the Env's PRNG.
func (e *Env) Int63() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rand.Int63()
}

// PlanRand is the PRNG a fault scenario draws its schedule from: a
// function of the seed, the scenario and the round only.
func (e *Env) PlanRand(scenario string) *rand.Rand {
	return nemesis.Rand(e.Seed, scenario, e.Round)
}

// Note records a line of the scenario's fault schedule.
func (e *Env) Note(format string, args ...any) {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.schedule = append(e.schedule, fmt.Sprintf(format, args...))
}

// Fail records why the scenario's workload could not finish as planned:
// its verdict is then unknown, never pass, unless a checker failed.
func (e *Env) Fail(format string, args ...any) {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.incomplete = append(e.incomplete, fmt.Sprintf(format, args...))
}

// Count adds n faults of a kind that the history does not record one by
// one (network faults, counted by the proxy; skewed clients).
func (e *Env) Count(kind string, n int) {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counted == nil {
		e.counted = map[string]int{}
	}
	e.counted[kind] += n
}

// Finding adds n to an expected, counted effect that is not a violation
// (a skewed clock taking over a healthy owner).
func (e *Env) Finding(name string, n int) {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.findings == nil {
		e.findings = map[string]int{}
	}
	e.findings[name] += n
}

// FindingMean records one round's value of a finding that is a level,
// not a count (a rate, a share of capacity): the scenario's finding is its
// mean over the rounds (--duration runs several), where adding them up,
// as Finding does, made fifteen rounds' rate fifteen times any reached.
func (e *Env) FindingMean(name string, n int) {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.means == nil {
		e.means = map[string][2]int{}
	}
	m := e.means[name]
	e.means[name] = [2]int{m[0] + n, m[1] + 1}
}

// Record is what a scenario recorded besides its history and ledger,
// taken in one value once it has run: what the runner's judge path and the
// result need of it.
type Record struct {
	// Incomplete lists why the workload could not finish (nil if it did).
	Incomplete []string
	// NotTested lists what the workload meant to test and did not,
	// although it finished (see Env.NotTested).
	NotTested []string
	// Schedule lists the faults the scenario planned, in order.
	Schedule []string
	// Counted counts the faults the history does not record one by one,
	// by kind (never nil).
	Counted map[string]int
	// Findings counts expected effects that are not violations, by name
	// (nil if none).
	Findings map[string]int
	// Episodes lists the scheduled episodes run, in order.
	Episodes []EpisodeRecord
	// LeakProbe is the client id of the leak probes (nil if none were
	// sent): see ProbeLeaks.
	LeakProbe *int
	// Skipped says why the scenario skipped itself ("" if it did not).
	Skipped string
	// Deaths counts the deaths on their own of the processes of the
	// scenario's stores (stores.Restarter), and FirstDeath is the first
	// one's error.
	Deaths     int
	FirstDeath string
}

// Record returns what the scenario recorded so far (see Record), copied:
// the Env may go on recording.
func (e *Env) Record() Record {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Record{Incomplete: slices.Clone(e.incomplete), NotTested: slices.Clone(e.untested), Schedule: slices.Clone(e.schedule),
		Counted: maps.Clone(e.counted), Episodes: slices.Clone(e.episodes), LeakProbe: e.leakProbe, Skipped: e.skipped,
		Deaths: e.deaths, FirstDeath: e.firstDeath}
	if st, ok := e.Store.(stores.Restarter); ok {
		if n, first := st.Deaths(); n > 0 {
			if r.Deaths == 0 {
				r.FirstDeath = first
			}
			r.Deaths += n
		}
	}
	if r.Counted == nil {
		r.Counted = map[string]int{}
	}
	if len(e.findings) > 0 {
		r.Findings = maps.Clone(e.findings)
	}
	for name, m := range e.means {
		if r.Findings == nil {
			r.Findings = map[string]int{}
		}
		r.Findings[name] = m[0] / m[1]
	}
	return r
}

// StartWorker starts a worker process on the scenario's store and waits
// until it has opened the store. Its client is what NewClient would make
// here (the run's client-side mutant included), in another process. It is
// killed when ctx ends.
func (e *Env) StartWorker(ctx context.Context, wo worker.Options) (*worker.Worker, error) {
	if why := WorkersSkip(e.setup.Caps); why != "" {
		return nil, fmt.Errorf("%s", why)
	}
	c := e.NewClient()
	setup := worker.Setup{
		Backend: e.setup.Backend.Name, Addr: e.setup.Addr, Config: e.Config, Client: c.ID, Seed: e.Int63(),
		MaxAttempts: c.MaxAttempts, Backoff: c.Backoff, MaxBackoff: c.MaxBackoff, WorkTime: c.WorkTime, FirstWorkTime: c.FirstWorkTime,
		Policy: c.Policy, Keys: c.Keys, DownstreamKeyed: c.DownstreamKeyed, DownstreamByKey: c.DownstreamByKey,
	}
	return worker.Start(ctx, worker.Spec{Command: e.setup.WorkerCommand, Hist: e.Hist, Ledger: e.Ledger, Setup: setup}, wo)
}

// WorkerPool makes a pool of worker processes (see StartWorker) whose
// failures are recorded with Fail.
func (e *Env) WorkerPool(ctx context.Context, wo worker.Options) *worker.Pool {
	return worker.NewPool(ctx, wo.StartPatience, func(ctx context.Context) (*worker.Worker, error) {
		return e.StartWorker(ctx, wo)
	}, func(err error) { e.Fail("%v", err) })
}

// Proxied starts a proxy named name in front of the scenario's server and
// opens the scenario's store (same namespace, same variant) through it.
// Close both with Unproxy, which counts the faults the proxy hit.
func (e *Env) Proxied(ctx context.Context, name string) (nemesis.Proxy, stores.Store, error) {
	if why := NetSkip(e.setup.Caps); why != "" {
		return nil, nil, fmt.Errorf("%s", why)
	}
	p, via, err := e.setup.Net.Proxy(name, e.setup.Addr)
	if err != nil {
		return nil, nil, err
	}
	st, err := e.setup.OpenAt(ctx, via, e.Config)
	if err != nil {
		p.Close()
		return nil, nil, fmt.Errorf("open %s store through proxy %s: %w", e.setup.Backend.Name, name, err)
	}
	return p, st, nil
}

// Unproxy heals and closes the proxy and the store opened through it, and
// counts the faults the proxy hit.
func (e *Env) Unproxy(p nemesis.Proxy, st stores.Store) {
	_ = p.Heal()
	e.keepDeaths(st)
	st.Close()
	_ = p.Close()
	for k, n := range p.Hits() {
		e.Count(k, n)
	}
}

// keepDeaths adds the deaths of st's processes on their own
// (stores.Restarter) to the scenario's: call it before closing a store
// the scenario opened beside its own.
func (e *Env) keepDeaths(st stores.Store) {
	r, ok := st.(stores.Restarter)
	if !ok {
		return
	}
	n, first := r.Deaths()
	if n == 0 {
		return
	}
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deaths == 0 {
		e.firstDeath = first
	}
	e.deaths += n
}

// Cluster is the replicated topology of the run (nil: none; see
// ClusterSkip).
func (e *Env) Cluster() nemesis.Cluster { return e.setup.Cluster }

// Server is the server control of the run (nil: none; see ServerSkip).
func (e *Env) Server() nemesis.Server { return e.setup.Server }

// parallel runs f(i) for i in [0, n) at once and waits for all.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f(i)
		}(i)
	}
	wg.Wait()
}

// Fresh gives the Env an empty history and ledger and a new tenant: a
// hunt runs many episodes on one store, each judged on its own.
func (e *Env) Fresh(tenant string) {
	e.Hist, e.Ledger, e.Tenant = history.New(), history.NewLedger(), tenant
}

// ProbeLeaks asks once for each of keys with a fingerprint no order uses,
// as a new client: call it once every one of them is past its retention
// and a Prune has run. A key still there answers 422 (or anything but a
// fresh claim): it leaked (the retention checker reads the answers). A
// fresh claim is released at once.
func (e *Env) ProbeLeaks(ctx context.Context, keys []stores.KeyRef) {
	id := e.NewClientID()
	r := e.root()
	r.mu.Lock()
	r.leakProbe = &id
	r.mu.Unlock()
	rec := e.Recorder(id, e.Store, e.clock)
	for _, k := range keys {
		d, err := rec.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "leak-probe", Now: e.clock.Now()})
		if err == nil && d.Outcome == stores.Claimed {
			_ = rec.Release(ctx, k, d.Token)
		}
	}
}

// RunPruner calls Prune every d, as a maintenance job would, recording
// each call, until the returned stop is called or ctx ends. A correct
// store's prune removes only keys past their retention, so it may run at
// any moment.
func (e *Env) RunPruner(ctx context.Context, d time.Duration) (stop func()) {
	pruner := e.Recorder(e.NewClientID(), e.Store, e.clock)
	return Every(ctx, d, func() { _, _ = pruner.Prune(ctx, e.clock.Now()) })
}

// Every calls f every d, on a goroutine of its own, until the returned
// stop is called or ctx ends (never, when d is 0); stop returns once f
// has returned for the last time.
func Every(ctx context.Context, d time.Duration, f func()) (stop func()) {
	if d <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Skip ends the scenario without a verdict, saying why: what it needs
// showed only once the store was open (a store that renews no lease).
// The scenario should return at once.
func (e *Env) Skip(why string) {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.skipped = why
}
