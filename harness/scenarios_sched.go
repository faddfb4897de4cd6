package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/sched"
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
// sleeps LockTTL + tickMargin.
func init() {
	Scenarios = append(Scenarios,
		Scenario{Name: "sched-race", Doc: "scheduled: three clients send the same order; the scheduler interleaves their statements (one owner, the rest 409 or replay)",
			run: episodes("sched-race")},
		Scenario{Name: "sched-takeover", Doc: "scheduled: three clients on one order; the clock moves past LockTTL between steps, work may fail and release, clocks may lag: stale owners must be fenced, tokens never repeat",
			run: episodes("sched-takeover")},
		Scenario{Name: "sched-crash", Doc: "scheduled: the owner crashes after its claim; past LockTTL two clients race for the stale claim: one takes it over, and the key is not stuck",
			run: episodes("sched-crash")},
		Scenario{Name: "sched-mismatch", Doc: "scheduled: two clients use one key with other parameters, in any order: always 422, never run",
			run: episodes("sched-mismatch")},
		Scenario{Name: "sched-retention", Doc: "scheduled: an order completes, the clock moves, a pruner prunes, the order is retried inside the retention: it must replay",
			run: episodes("sched-retention")},
	)
}

// tickMargin is how far past LockTTL a tick sleeps on a server-clock store,
// beyond the model's slack (5 ms) and the server clock's resolution (1 ms).
const tickMargin = 20 * time.Millisecond

// Tick is the name of the scheduler action that moves the clock past LockTTL.
const Tick = "clock+LockTTL"

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
	"sched-race": {clients: []clientSpec{{attempts: 4}, {attempts: 4}, {attempts: 4}}},
	"sched-takeover": {
		clients: []clientSpec{{mayFail: true, attempts: 6}, {mayFail: true, attempts: 6}, {mayFail: true, attempts: 6}},
		ticks:   2, skews: true},
	"sched-crash": {
		clients:    []clientSpec{{crashAt: faults.RunAfterClaim, attempts: 1, first: true}, {attempts: 3}, {attempts: 3}},
		staleFirst: true, probe: true},
	"sched-mismatch": {clients: []clientSpec{{attempts: 3}, {variant: "&currency=eur", attempts: 3}}},
	"sched-retention": {
		clients: []clientSpec{{attempts: 3}, {attempts: 3}},
		ticks:   2, prunes: 2},
}

// IsScheduled reports whether the scenario runs under the controlled
// scheduler, one episode per key.
func IsScheduled(scenario string) bool {
	_, ok := episodeSpecs[scenario]
	return ok
}

// episodes is the run of a scheduled scenario: one episode per key, each
// with a seeded PRNG chooser, then the clock moved far enough that the
// runner's final probe finds every claim stale.
func episodes(name string) func(ctx context.Context, env *Env) {
	return func(ctx context.Context, env *Env) {
		env.useSchedClock()
		for k := 0; k < env.Keys && ctx.Err() == nil; k++ {
			env.mu.Lock()
			seed := env.rand.Int63()
			env.mu.Unlock()
			if _, err := runEpisode(ctx, env, name, k, sched.NewRandom(seed)); err != nil {
				env.incomplete = append(env.incomplete, fmt.Sprintf("%s key %d: %v", name, k, err))
			}
		}
		env.afterEpisodes()
	}
}

// useSchedClock gives a caller-clock store's clients a manual clock, which
// only the scheduler's ticks move. Server-clock stores keep the real one.
func (e *Env) useSchedClock() {
	if e.opts.Backend.Clock == stores.ServerClock {
		return
	}
	if _, ok := e.clock.(*faults.ManualClock); !ok {
		e.clock = faults.NewManualClock(time.Now())
	}
}

// tick moves the clock past LockTTL: a manual clock jumps; a server's
// clock is waited for.
func (e *Env) tick() {
	if m, ok := e.clock.(*faults.ManualClock); ok {
		m.Advance(e.Config.LockTTL + time.Millisecond)
		return
	}
	time.Sleep(e.Config.LockTTL + tickMargin)
}

// afterEpisodes moves a manual clock past every claim's LockTTL (a claim
// made by a client whose clock lags, too), for the runner's final probe.
func (e *Env) afterEpisodes() {
	if m, ok := e.clock.(*faults.ManualClock); ok {
		m.Advance(3 * e.Config.LockTTL)
	}
}

// schedOptions are the scheduler's bounds for the store. An embedded
// store answers in microseconds to a few milliseconds (SQLite's commit
// included), so a client still running after embeddedBlock waits for
// SQLite's write lock, held by a client parked inside its Begin: the
// shorter bound keeps those waits cheap. A server answers over the network,
// and no flow here holds a lock between failpoints there, so its bound is
// the default, generous for a loaded machine.
func (e *Env) schedOptions() sched.Options {
	o := sched.DefaultOptions()
	if e.opts.Backend.Clock != stores.ServerClock {
		o.Block = embeddedBlock
	}
	return o
}

// embeddedBlock is the scheduler's Block for embedded stores.
const embeddedBlock = 40 * time.Millisecond

// runEpisode runs the named scheduled scenario's episode on order k with
// the chooser, and returns the episode's log: the interleaving, the
// statements each client ran and the actions taken.
func runEpisode(ctx context.Context, env *Env, name string, k int, ch sched.Chooser) ([]sched.Event, error) {
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
		s := sched.New(ch, env.schedOptions())
		env.schedClients(s, spec, first, k)
		err := s.Run(ctx)
		log = append(log, s.Log()...)
		if err != nil {
			return log, err
		}
		if spec.staleFirst {
			env.tick()
			log = append(log, sched.Event{Kind: sched.Acted, Action: Tick})
		}
	}
	s := sched.New(ch, env.schedOptions())
	if spec.ticks > 0 {
		s.Action(Tick, spec.ticks, env.tick)
	}
	env.schedClients(s, spec, rest, k)
	if spec.prunes > 0 {
		id := env.newClientID()
		pruner := &Recorder{Store: env.Store, Client: id, Hist: env.Hist, Clock: env.clock}
		s.Client(fmt.Sprintf("c%d", id), func(ctx context.Context) {
			for i := 0; i < spec.prunes; i++ {
				if faults.Hit(ctx, "prune") != nil {
					return
				}
				_, _ = pruner.Prune(ctx, env.clock.Now())
			}
		})
	}
	err := s.Run(ctx)
	return append(log, s.Log()...), err
}

// schedClients registers the episode's clients with the scheduler.
func (env *Env) schedClients(s *sched.Scheduler, spec episodeSpec, clients []clientSpec, k int) {
	lag := -(env.Config.LockTTL + time.Millisecond)
	for _, cs := range clients {
		var rules []Rule
		if cs.crashAt != "" {
			rules = append(rules, Rule{Failpoint: cs.crashAt, Action: Crash(), Times: 1})
		}
		c := env.NewClient(rules...)
		name := fmt.Sprintf("c%d", c.ID)
		c.WorkTime, c.Backoff, c.MaxBackoff = 0, 0, 1 // no sleeping: the scheduler decides
		c.MaxAttempts, c.Policy = cs.attempts, stores.ReleaseOnError
		if cs.mayFail && s.Pick(name+" first work fails", "no", "yes") == 1 {
			failed := false // the first time it gets to run the work, whichever attempt that is
			c.FailWork = func(Order, int) bool {
				f := !failed
				failed = true
				return f
			}
		}
		if spec.skews && env.opts.Backend.Clock != stores.ServerClock &&
			s.Pick(name+" clock", "on time", "behind by LockTTL") == 1 {
			clk := faults.SkewedClock{Base: env.clock, Skew: lag}
			c.Clock = clk
			if r, ok := c.Store.(*Recorder); ok {
				r.Clock = clk
			}
		}
		o := env.Order(k, cs.variant)
		sc := s.Client(name, func(ctx context.Context) { c.Submit(ctx, o) })
		c.Yield = &pauseNoter{client: sc, s: s, id: c.ID, hist: env.Hist}
	}
}

// pauseNoter passes a client's failpoints to the scheduler and records, as
// a pause fault, a wait at a failpoint where the client holds a claim
// during which the clock moved past LockTTL: a takeover of the client is
// then legitimate, and the trace says why it happened.
type pauseNoter struct {
	client *sched.Client
	s      *sched.Scheduler
	id     int
	hist   *History
}

func (p *pauseNoter) Hit(ctx context.Context, name string) error {
	holds := name == faults.RunAfterClaim || name == faults.RunAfterWork || name == faults.RunBeforeRelease
	before, start := p.s.Used(Tick), p.hist.Now()
	err := p.client.Hit(ctx, name)
	if holds && p.s.Used(Tick) != before {
		p.hist.AddFault(Fault{Client: p.id, Key: keyOf(ctx), Kind: "pause", Failpoint: name, Start: start, End: p.hist.Now()})
	}
	return err
}
