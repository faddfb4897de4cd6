package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/sched"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// The scheduled scenarios run each key as one episode under the controlled
// scheduler (harness/sched): a few clients on one order, run one at a time
// between failpoints, with the clock moved past LockTTL only when the
// chooser says so. A seeded PRNG picks the interleaving, the clock ticks,
// the clients' clock skews and whether their work fails; the same episode
// under rapid's chooser shrinks a failure to its shortest interleaving.
//
// Time: a caller-clock store (memory, SQLite) gets a manual clock that only
// a tick moves (by LockTTL + 1 ms), so an episode costs no sleeping; a
// server-clock store (Postgres, Redis) judges by its own clock, so a tick
// sleeps LockTTL + tickMargin. On a manual clock, sched-crash's stale-first
// tick lands on the boundary (staleBoundary): exactly on LockTTL, one
// millisecond short of it (and the chooser may then move the clock the last
// millisecond, Nudge), or one past it, by the episode's key.
//
// The same client setup (SchedClient) serves the demos, which replay a
// scripted interleaving instead of a chosen one.

// tickMargin is how far past LockTTL a tick sleeps on a server-clock store,
// beyond the model's slack (5 ms) and the server clock's resolution (1 ms).
const tickMargin = 20 * time.Millisecond

// Tick is the name of the scheduler action that moves the clock past LockTTL.
const Tick = "clock+LockTTL"

// Nudge is the name of the scheduler action that moves a manual clock by
// one millisecond: offered once after a stale-first tick that stopped one
// millisecond short of LockTTL, from when a client has been told 409, it
// lands the crashed owner's claim exactly on LockTTL.
const Nudge = "clock+1ms"

// staleBoundary is where sched-crash's stale-first tick of episode k lands
// on a manual clock, from the crashed owner's claim: exactly LockTTL (key
// 0, and every third), one millisecond short (the claim is still live:
// 409, until a Nudge lands it on LockTTL), or one past. The contract (the
// decision table, models.Decide) makes a claim stale at LockTTL, not
// after it, so a store that judges staleness by > instead of >= answers
// 409 at exactly LockTTL (the stale-boundary mutant), and one that judges
// a millisecond early takes a live claim over. Every seed has key 0: a
// run of the scenario always lands one episode on the boundary.
func staleBoundary(k int) time.Duration {
	return [EpisodeKinds]time.Duration{0, -time.Millisecond, time.Millisecond}[k%EpisodeKinds]
}

// EpisodeKinds is how many kinds of episode a scheduled scenario has: the
// episodes of key k and of key k+EpisodeKinds are alike (staleBoundary,
// episodeSpec.aba and the retention coda go by k%EpisodeKinds), so a search that
// runs keys 0 to EpisodeKinds-1 in turn meets each kind.
const EpisodeKinds = 3

// episodeSpec is one scheduled episode: the clients on one order and what
// the chooser may vary.
type episodeSpec struct {
	clients []clientSpec
	ticks   int  // how many times the chooser may move the clock past LockTTL
	prunes  int  // Prune calls made by a pruner client (0: no pruner)
	skews   bool // caller-clock stores: the chooser picks each client's clock skew
	probe   bool // a hunt probes the key for liveness after the episode
	// staleFirst: the clock moves past LockTTL once the first clients are
	// done, before the others start (the owner has crashed long ago).
	staleFirst bool
	// retentionEdge: on a manual clock, the chooser may move the clock to
	// one millisecond short of the key's record's retention (RetentionEdge).
	retentionEdge bool
	// aba: the episodes of key 0 and every third begin with abaSteps, a
	// taker parked at its read while the row is released, claimed with
	// other parameters and goes stale; the chooser picks the rest.
	aba bool
}

// clientSpec is one client of an episode.
type clientSpec struct {
	variant  string // fingerprint variant of its order ("" the first)
	mayFail  bool   // the chooser picks whether the first work it runs fails
	crashAt  string // it crashes at this failpoint on its first attempt
	attempts int
	first    bool // it runs (alone) before the other clients start
}

// episodeSpecs are the scheduled scenarios' episodes.
var episodeSpecs = map[string]episodeSpec{
	"sched-race": {clients: []clientSpec{{attempts: 4}, {attempts: 4}, {attempts: 4}}, prunes: 1},
	"sched-takeover": {
		clients: []clientSpec{{mayFail: true, attempts: 6}, {mayFail: true, attempts: 6}, {mayFail: true, attempts: 6}},
		ticks:   2, skews: true},
	"sched-crash": {
		clients:    []clientSpec{{crashAt: faults.RunAfterClaim, attempts: 1, first: true}, {attempts: 3}, {attempts: 3}},
		staleFirst: true, probe: true},
	// Other parameters arrive while the first claim is live, once it went
	// stale, after a failed work released it, or while a third client
	// takes it over.
	"sched-mismatch": {clients: []clientSpec{{mayFail: true, attempts: 3}, {variant: "&currency=eur", attempts: 3}, {mayFail: true, attempts: 3}},
		ticks: 2, aba: true},
	"sched-retention": {
		clients: []clientSpec{{attempts: 3}, {attempts: 3}},
		ticks:   2, prunes: 2, retentionEdge: true},
}

// episodeIDs is how many client ids one episode of the scenario uses: one
// per client and one for its pruner.
func episodeIDs(name string) int {
	spec := episodeSpecs[name]
	n := len(spec.clients)
	if spec.prunes > 0 {
		n++
	}
	return n
}

// runRecorded runs the episode of key k with a PRNG chooser seeded by
// seed, and returns its record.
func runRecorded(ctx context.Context, env *Env, name string, k int, seed int64, first int) EpisodeRecord {
	rec := &sched.Recording{Next: sched.NewRandom(seed)}
	if env.ServerClock() {
		env.unticked = &untickedClock{from: time.Now()}
		defer func() { env.unticked = nil }()
	}
	log, err := RunEpisode(ctx, env, name, k, rec)
	er := EpisodeRecord{Round: env.Round, Key: k, Order: env.Order(k, "").Key.String(), FirstClient: first, Choices: rec.Choices(),
		Inside: insideStops(log), Blocked: blockedStops(log), Unticked: env.unticked.end()}
	if err != nil {
		er.Err = err.Error()
	}
	return er
}

// recordEpisode keeps the episode's record, and a failure if it had one.
func (e *Env) recordEpisode(name string, er EpisodeRecord) {
	e = e.root()
	if er.Err != "" {
		e.Fail("%s key %d: %s", name, er.Key, er.Err)
	}
	e.mu.Lock()
	e.episodes = append(e.episodes, er)
	e.mu.Unlock()
}

// EpisodeRecord is what it takes to replay one scheduled episode on the
// same interleaving: its round and order, and every choice the chooser
// made (sched.Replay takes them back).
type EpisodeRecord struct {
	Round int    `json:"round"`
	Key   int    `json:"key"`
	Order string `json:"order"` // the episode's key, tenant/key
	// FirstClient is the id its first client had: a replay gives its
	// clients the same ids, so the scheduler names them alike.
	FirstClient int    `json:"first_client"`
	Choices     []int  `json:"choices"`
	Err         string `json:"err,omitempty"`
	// Inside counts the times a client stopped at a failpoint inside a
	// store call (a round trip, a read before a write, a wait), where the
	// scheduler could switch clients in the middle of a call: 0 means the
	// episode was interleaved only between the calls.
	Inside int `json:"inside,omitempty"`
	// Blocked counts the times a client let run reached no failpoint
	// within the scheduler's bound (sched.Blocked events): see
	// UnannouncedWaits.
	Blocked int `json:"blocked,omitempty"`
	// Unticked is, on a server-clock store, the longest stretch of the
	// episode's real time between the clock's ticks (untickedClock): at
	// LockTTL or more, a claim may have gone stale by the server's clock
	// rather than by a tick (ClockOutran).
	Unticked time.Duration `json:"unticked_ns,omitempty"`
}

// UseSchedClock gives a caller-clock store's clients a manual clock, which
// only the scheduler's ticks move. Server-clock stores keep the real one.
func (e *Env) UseSchedClock() {
	if e.ServerClock() {
		return
	}
	if _, ok := e.clock.(*faults.ManualClock); !ok {
		e.clock = faults.NewManualClock(time.Now())
	}
}

// Tick moves the clock past LockTTL: a manual clock jumps; a server's
// clock is waited for.
func (e *Env) Tick() { e.tickBy(time.Millisecond) }

// tickBy moves a manual clock by LockTTL + off (off may be negative or
// zero: a boundary, staleBoundary); a server's clock, which no sleep
// lands on a millisecond, is waited for past LockTTL as by Tick (the
// model's Slack makes its boundary go either way). It returns the move's
// name for an episode's log.
func (e *Env) tickBy(off time.Duration) string {
	if m, ok := e.clock.(*faults.ManualClock); ok {
		m.Advance(e.Config.LockTTL + off)
		switch {
		case off == 0:
			return "clock+LockTTL exactly"
		case off != time.Millisecond:
			return fmt.Sprintf("clock+LockTTL%+dms", off.Milliseconds())
		}
		return Tick
	}
	e.unticked.tick(e.Config.LockTTL + tickMargin)
	return Tick
}

// afterEpisodes moves a manual clock past every claim's LockTTL (a claim
// made by a client whose clock lags, too), for the runner's final probe.
func (e *Env) afterEpisodes() {
	if m, ok := e.clock.(*faults.ManualClock); ok {
		m.Advance(3 * e.Config.LockTTL)
	}
}

// NewScheduler makes a controlled scheduler for the store, with Tick as
// an action the chooser may take up to ticks times. How long a client may
// run without reaching a failpoint before the scheduler takes it to be
// blocked inside the store (sched.Options.Block):
//
//   - a backend that announces its waits (stores.Backend.WaitsAnnounced,
//     or idemtest.Factory.WaitsAnnounced) blocks only where the scheduler sees
//     it, so a quiet client is slow, not blocked: announcedBlock, only
//     against a wait the declaration missed. A loaded machine then cannot
//     change the interleaving a seed gives;
//   - any other embedded store answers in microseconds to a few
//     milliseconds, so a client still running after embeddedBlock waits
//     for a lock held by a parked client: the short bound keeps those
//     waits cheap;
//   - any other server answers over the network: the default, generous
//     for a loaded machine.
func (e *Env) NewScheduler(ch sched.Chooser, ticks int) *sched.Scheduler {
	o := sched.DefaultOptions()
	o.Block = e.schedBlock(o.Block)
	s := sched.New(ch, o)
	if e.Observe != nil {
		s.Observe(e.Observe)
	}
	if ticks > 0 {
		s.Action(Tick, ticks, e.Tick)
	}
	return s
}

// schedBlock is the scheduler's Block for the scenario's next episode
// (see NewScheduler), def the default.
func (e *Env) schedBlock(def time.Duration) time.Duration {
	switch {
	case e.setup.Backend.WaitsAnnounced && e.unannounced() < announcedDistrust:
		return announcedBlock
	case !e.ServerClock():
		return embeddedBlock
	}
	return def
}

// announcedDistrust is how many waits a store that declares it announces
// them may be caught in (blocked announcedBlock without reaching a
// failpoint) before the rest of the scenario no longer trusts the
// declaration and blocks as for any store: a wrong declaration cost
// announcedBlock 56 times in one scenario, a quarter of an hour.
const announcedDistrust = 3

// unannounced is how many times the scenario's episodes so far were
// blocked inside a store call without reaching a failpoint
// (EpisodeRecord.Blocked).
func (e *Env) unannounced() int {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.episodes {
		n += r.Blocked
	}
	return n
}

// embeddedBlock is the scheduler's Block for embedded stores that do not
// announce their waits; announcedBlock for stores that do (a third of
// sched's Stuck: a statement slowed by a loaded machine finishes well
// within it).
const (
	embeddedBlock  = 40 * time.Millisecond
	announcedBlock = 5 * time.Second
)

// Episode reports whether the named scenario is scheduled and, if so,
// whether its episodes end with a liveness probe of their key.
func Episode(name string) (scheduled, probe bool) {
	spec, ok := episodeSpecs[name]
	return ok, spec.probe
}

// RunEpisode runs the named scheduled scenario's episode on order k with
// the chooser, and returns the episode's log: the interleaving, the
// statements each client ran and the actions taken.
func RunEpisode(ctx context.Context, env *Env, name string, k int, ch sched.Chooser) ([]sched.Event, error) {
	spec, ok := episodeSpecs[name]
	if !ok {
		return nil, fmt.Errorf("no scheduled scenario %q", name)
	}
	var log []sched.Event
	var first, rest []clientSpec
	for _, cs := range spec.clients {
		if cs.first {
			first = append(first, cs)
		} else {
			rest = append(rest, cs)
		}
	}
	if len(first) > 0 {
		s := env.NewScheduler(ch, 0)
		env.episodeClients(s, spec, first, k, false)
		err := s.Run(ctx)
		log = append(log, s.Log()...)
		if err != nil {
			return log, err
		}
		if spec.staleFirst {
			log = append(log, sched.Event{Kind: sched.Acted, Action: env.tickBy(staleBoundary(k))})
		}
	}
	var script *sched.Script
	if spec.aba && k%EpisodeKinds == 0 {
		script = &sched.Script{Then: ch} // its steps once the clients have names
		ch = script
	}
	s := env.NewScheduler(ch, spec.ticks)
	mark := env.Hist.Mark() // the episode's calls from here are recorded after it
	if m, manual := env.clock.(*faults.ManualClock); manual && spec.staleFirst && staleBoundary(k) < 0 {
		// One millisecond short of LockTTL: once a client was told 409,
		// the chooser may move the clock onto LockTTL.
		key, from := env.Order(k, "").Key, env.Hist.Now()
		told := func() bool {
			return env.Hist.HasSince(mark, func(op history.Op) bool {
				return op.Input.Key == key && op.Call >= from && op.Input.Kind == models.Begin && !op.Output.Unknown &&
					op.Output.Decision.Outcome == stores.InFlight
			})
		}
		s.ActionWhen(Nudge, 1, told, func() { m.Advance(-staleBoundary(k)) })
	}
	if m, manual := env.clock.(*faults.ManualClock); manual && spec.retentionEdge {
		env.retentionEdge(s, m, k, mark)
	}
	names := env.episodeClients(s, spec, rest, k, script != nil)
	if script != nil {
		script.Steps = abaSteps(names)
	}
	if spec.prunes > 0 {
		env.SchedPruner(s, "", spec.prunes)
	}
	err := s.Run(ctx)
	log = append(log, s.Log()...)
	if m, manual := env.clock.(*faults.ManualClock); manual && spec.retentionEdge && k%EpisodeKinds == 0 && err == nil && ctx.Err() == nil {
		log = append(log, env.retentionCoda(ctx, m, k, mark)...)
	}
	return log, err
}

// episodeClients registers the episode's clients with the scheduler and
// returns their names; the chooser picks whether each one's first work
// fails and, on caller-clock stores, whether its clock lags. With aba
// the first client's first work fails and the second's clock lags,
// whatever the chooser (abaSteps).
func (e *Env) episodeClients(s *sched.Scheduler, spec episodeSpec, clients []clientSpec, k int, aba bool) []string {
	var names []string
	for i, cs := range clients {
		sc := SchedClient{Variant: cs.variant, Attempts: cs.attempts, CrashAt: cs.crashAt}
		e.SchedClient(s, sc, func(name string, sc *SchedClient) {
			names = append(names, name)
			sc.FailFirst = (aba && i == 0) || cs.mayFail && s.Pick(name+" first work fails", "no", "yes") == 1
			sc.Lag = !e.ServerClock() && ((aba && i == 1) || spec.skews && s.Pick(name+" clock", "on time", "behind by LockTTL") == 1)
		}, k)
	}
	return names
}

// SchedClient says how one client under the controlled scheduler behaves.
// It never sleeps (no work time, no backoff): the scheduler decides who
// runs, and Tick moves the clock.
type SchedClient struct {
	// Name is the client's name in the scheduler; "" names it c<id>.
	Name    string
	Variant string // fingerprint variant of its order ("" the order's own)
	// Attempts bounds its attempts (0: 4).
	Attempts int
	// FailFirst: the first time it runs the work, whichever attempt that
	// is, the provider fails before charging.
	FailFirst bool
	// SaveError saves a failed work's error as the response (Stripe's
	// policy); otherwise the claim is released.
	SaveError bool
	// CrashAt: it crashes at this failpoint the first time it reaches it,
	// and never cleans up.
	CrashAt string
	// Lag: on a caller-clock store its clock runs behind by LockTTL.
	Lag bool
}

// SchedClient makes a client that sends order k (with the spec's
// fingerprint variant) under the scheduler, and registers it. decide, if
// set, may change the spec once the client's name is known (an episode's
// chooser picks FailFirst and Lag there).
func (e *Env) SchedClient(s *sched.Scheduler, spec SchedClient, decide func(name string, spec *SchedClient), k int) *workload.Client {
	c := e.NewClient()
	name := spec.Name
	if name == "" {
		name = fmt.Sprintf("c%d", c.ID)
	}
	if decide != nil {
		decide(name, &spec)
	}
	c.WorkTime, c.Backoff, c.MaxBackoff = 0, 0, 1 // no sleeping: the scheduler decides
	c.MaxAttempts, c.Policy = 4, stores.ReleaseOnError
	if spec.Attempts > 0 {
		c.MaxAttempts = spec.Attempts
	}
	if spec.SaveError {
		c.Policy = stores.SaveError
	}
	if spec.FailFirst {
		failed := false // the first time it gets to run the work, whichever attempt that is
		c.FailWork = func(workload.Order, int) bool {
			f := !failed
			failed = true
			return f
		}
	}
	if spec.Lag && !e.ServerClock() {
		clk := faults.SkewedClock{Base: e.clock, Skew: -(e.Config.LockTTL + time.Millisecond)}
		c.Clock = clk
		if r, ok := c.Store.(*history.Recorder); ok {
			r.Clock = clk
		}
	}
	o := e.Order(k, spec.Variant)
	sc := s.Client(name, func(ctx context.Context) { c.Submit(ctx, o) })
	c.Yield = &schedYield{client: sc, s: s, id: c.ID, hist: e.Hist, crashAt: spec.CrashAt}
	return c
}

// prunerStop is the failpoint where a scheduled pruner waits before each
// Prune: the harness's, between calls, never inside one (insideStops).
const prunerStop = "prune"

// SchedPruner registers a client that calls Prune n times, each when the
// scheduler lets it past the prunerStop failpoint. It returns its client
// id.
func (e *Env) SchedPruner(s *sched.Scheduler, name string, n int) int {
	id := e.NewClientID()
	if name == "" {
		name = fmt.Sprintf("c%d", id)
	}
	pruner := e.Recorder(id, e.Store, e.clock)
	s.Client(name, func(ctx context.Context) {
		for i := 0; i < n; i++ {
			if faults.Hit(ctx, prunerStop) != nil {
				return
			}
			_, _ = pruner.Prune(ctx, e.clock.Now())
		}
	})
	return id
}

// schedYield passes a client's failpoints to the scheduler. It crashes
// the client at its crash failpoint, once (recorded as a crash), and
// records as a pause a wait at a failpoint where the client holds a claim
// during which the clock moved past LockTTL: a takeover of the client is
// then legitimate, and the trace says why it happened.
type schedYield struct {
	client  *sched.Client
	s       *sched.Scheduler
	id      int
	hist    *history.History
	crashAt string
	crashed bool
}

// Waits passes on the scheduler's faults.Waiter: a client of an episode
// about to block on a lock in the store parks instead.
func (p *schedYield) Waits() bool { return p.client.Waits() }

func (p *schedYield) Hit(ctx context.Context, name string) error {
	if name == p.crashAt && !p.crashed {
		p.crashed = true
		now := p.hist.Now()
		p.hist.AddFault(history.Fault{Client: p.id, Key: workload.KeyOf(ctx), Kind: history.FaultCrash, Failpoint: name, Start: now, End: now})
		faults.Trace(ctx, "", "CRASHES at "+name+": it never cleans up")
		return faults.ErrCrashed
	}
	holds := name == faults.RunAfterClaim || name == faults.RunAfterWork || name == faults.RunBeforeRelease
	before, start := p.s.Used(Tick), p.hist.Now()
	err := p.client.Hit(ctx, name)
	if holds && p.s.Used(Tick) != before {
		p.hist.AddFault(history.Fault{Client: p.id, Key: workload.KeyOf(ctx), Kind: history.FaultPause, Failpoint: name, Start: start, End: p.hist.Now()})
	}
	return err
}
