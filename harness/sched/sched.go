// Package sched is the controlled scheduler: clients run one at a time,
// from one failpoint to the next, and a Chooser picks who goes next (or
// which action, such as moving the clock past LockTTL, happens next). A
// seeded PRNG explores interleavings in CLI runs; rapid's draws do it in
// property tests, so a failing interleaving shrinks to the shortest one; a
// Script replays a chosen interleaving for a demo.
//
// Each client is a faults.Handler (and a faults.Tracer, to record the
// statements it runs): at every failpoint it parks until the scheduler lets
// it go. A client let go that reaches no failpoint within Options.Block is
// taken to be blocked inside the store (a row lock, SQLite's write lock held
// by a parked client) and another client is let run; when every live client
// is blocked for Options.Stuck the run is abandoned, and after
// Options.MaxSteps decisions every client runs freely to its end, so the
// scheduler never hangs.
package sched

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
)

// Option is one thing the scheduler may do next: let a parked client run
// (Client, waiting At a failpoint), take an action (Action), or, for a
// value choice made with Pick, take one value (Pick, Value).
type Option struct {
	Client string `json:"client,omitempty"`
	At     string `json:"at,omitempty"`
	Action string `json:"action,omitempty"`
	Pick   string `json:"pick,omitempty"`
	Value  string `json:"value,omitempty"`
}

// String prints the option as traces show it.
func (o Option) String() string {
	switch {
	case o.Action != "":
		return o.Action
	case o.Pick != "":
		return o.Pick + "=" + o.Value
	}
	return o.Client + "@" + o.At
}

// Chooser picks the next option: the index of one of opts (never empty).
type Chooser interface {
	Choose(opts []Option) int
}

// Options bound the scheduler's waits.
type Options struct {
	// Block: a client let run that reaches no failpoint (and does not
	// finish) within Block is blocked inside the store; another runs.
	Block time.Duration
	// Stuck: when every live client has been blocked this long with no
	// event, the run is abandoned (their contexts are cancelled).
	Stuck time.Duration
	// MaxSteps: after this many decisions, every client runs freely.
	MaxSteps int
}

// DefaultOptions suit a loaded 2-core machine: a statement answers well
// within 150 ms, and SQLite's busy timeout (5 s) ends any lock wait before
// Stuck.
func DefaultOptions() Options {
	return Options{Block: 150 * time.Millisecond, Stuck: 15 * time.Second, MaxSteps: 400}
}

// ErrStuck is returned by Run when every live client stayed blocked for
// Options.Stuck.
var ErrStuck = errors.New("sched: every client blocked inside the store")

type state int

const (
	running state = iota // let go (or starting), expected at a failpoint soon
	blocked              // let go, but no failpoint within Block
	parked               // waiting at a failpoint
	done                 // its body returned
)

// Client is one client under the scheduler: the faults.Handler and
// faults.Tracer its context carries.
type Client struct {
	s     *Scheduler
	name  string
	body  func(ctx context.Context)
	grant chan struct{}
	// owned by the scheduler's loop
	state    state
	at       string
	from     string // the failpoint it was last let run from
	spun     bool   // its last turn ended where it began: it backs off
	deadline time.Time
	lastRun  int
	// recheck: it was blocked, and another client has run since, which
	// may have freed what it waits for; it is waited for like a running
	// client (Block after the world last moved) before the next choice.
	recheck bool
}

// Name is the client's name in options and traces.
func (c *Client) Name() string { return c.name }

// Hit parks the client at the failpoint until the scheduler lets it run.
func (c *Client) Hit(ctx context.Context, name string) error {
	s := c.s
	if s.isFree() {
		return nil
	}
	select {
	case s.events <- event{c: c, at: name}:
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
	select {
	case <-c.grant:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// Waits makes the client a faults.Waiter: until the scheduler lets every
// client run freely, a client about to block on a lock in the store parks
// at faults.WaitTurn instead, and tries the lock again when let go.
func (c *Client) Waits() bool { return !c.s.isFree() }

// Trace records a statement the client ran and what it saw.
func (c *Client) Trace(_ context.Context, stmt, result string) {
	c.s.record(Event{Kind: Statement, Client: c.name, Stmt: stmt, Result: result})
}

type event struct {
	c    *Client
	at   string
	done bool
}

type action struct {
	name string
	max  int
	used int
	when func() bool // nil: always
	f    func()
}

// Scheduler runs its clients one at a time between failpoints.
type Scheduler struct {
	chooser Chooser
	opts    Options
	clients []*Client
	actions []*action
	events  chan event
	ctx     context.Context
	start   time.Time
	steps   int
	observe func() string

	mu   sync.Mutex
	free bool
	log  []Event
}

// New makes a scheduler that asks ch at every decision.
func New(ch Chooser, o Options) *Scheduler {
	d := DefaultOptions()
	if o.Block <= 0 {
		o.Block = d.Block
	}
	if o.Stuck <= 0 {
		o.Stuck = d.Stuck
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = d.MaxSteps
	}
	s := &Scheduler{chooser: ch, opts: o, ctx: context.Background(), start: time.Now()}
	if a, ok := ch.(attacher); ok {
		a.attach(s)
	}
	return s
}

// attacher is a Chooser that reads the scheduler's state (Script, RoundRobin).
type attacher interface{ attach(*Scheduler) }

// Client registers a client that runs body when Run starts. body's context
// carries the client as its failpoint handler and tracer; a harness client
// that installs its own handler should chain to the returned Client.
func (s *Scheduler) Client(name string, body func(ctx context.Context)) *Client {
	c := &Client{s: s, name: name, body: body, grant: make(chan struct{}, 1), lastRun: -1}
	s.clients = append(s.clients, c)
	return c
}

// Action offers f as an option up to max times (a clock tick, say). It
// runs on the scheduler's goroutine while every client is parked or
// blocked, so it must not wait on a client.
func (s *Scheduler) Action(name string, max int, f func()) {
	s.ActionWhen(name, max, nil, f)
}

// ActionWhen is Action offered only while when reports true (nil: always),
// asked at each decision while no client runs: an action that means
// something only after an event, such as the clock's last millisecond to
// LockTTL moved once a client has been answered 409 one millisecond short.
// when, like f, must not wait on a client.
func (s *Scheduler) ActionWhen(name string, max int, when func() bool, f func()) {
	s.actions = append(s.actions, &action{name: name, max: max, when: when, f: f})
}

// Observe has f called whenever no client runs (each waits at a failpoint,
// is blocked inside the store, or is done): before every decision and once
// at the end. What f returns is recorded as an Observed event, so a log
// says what the world looked like between steps (a demo: the key's row).
// f must not wait for a client: one may hold a lock while it waits.
func (s *Scheduler) Observe(f func() string) { s.observe = f }

// Used says how many times the named action has run; safe from any
// goroutine (a client compares it before and after a failpoint to learn
// whether the clock moved while it was parked).
func (s *Scheduler) Used(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.actions {
		if a.name == name {
			return a.used
		}
	}
	return 0
}

// Pick lets the chooser pick one of values (a client's clock skew, whether
// its work fails): the search explores these with the interleavings. It is
// meant for setting up, before Run.
func (s *Scheduler) Pick(label string, values ...string) int {
	if len(values) == 0 {
		panic("sched: Pick with no values")
	}
	opts := make([]Option, len(values))
	for i, v := range values {
		opts[i] = Option{Pick: label, Value: v}
	}
	i := s.choose(opts)
	s.record(Event{Kind: Picked, Pick: label, Value: values[i]})
	return i
}

func (s *Scheduler) choose(opts []Option) int {
	i := s.chooser.Choose(opts)
	if i < 0 || i >= len(opts) {
		panic(fmt.Sprintf("sched: chooser picked %d of %d options", i, len(opts)))
	}
	return i
}

// Run starts every client and schedules them until all have returned. It
// returns ErrStuck (wrapped) when every live client stayed blocked for
// Options.Stuck, or the context's error.
func (s *Scheduler) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.ctx = ctx
	s.start = time.Now()
	s.events = make(chan event, 2*len(s.clients)+1)
	var wg sync.WaitGroup
	for _, c := range s.clients {
		c.state, c.deadline = running, time.Now().Add(s.opts.Block)
		cctx := faults.WithTracer(faults.WithHandler(ctx, c), c)
		wg.Add(1)
		go func(c *Client) {
			defer wg.Done()
			defer func() { s.events <- event{c: c, done: true} }()
			c.body(cctx)
		}(c)
	}
	err := s.loop(ctx)
	if err != nil {
		cancel()
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(s.opts.Stuck):
		if err == nil {
			err = fmt.Errorf("%w: clients did not stop within %v", ErrStuck, s.opts.Stuck)
		}
	}
	return err
}

func (s *Scheduler) isFree() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free
}

func (s *Scheduler) loop(ctx context.Context) error {
	for {
		// Once every client runs freely, the parked ones go (and apply
		// lets later arrivals through at once), before any wait for a
		// running one: a running client may be waiting for what a parked
		// one holds (SQLite's write lock, taken inside Begin's
		// transaction), and it no longer announces that wait.
		if s.isFree() {
			for _, c := range s.clients {
				if c.state == parked {
					s.grant(c)
				}
			}
		}
		// Wait for the clients let go: each parks, finishes, or is blocked.
		if r := s.earliestRunning(); r != nil {
			d := time.Until(r.deadline)
			if d <= 0 {
				r.state = blocked
				if !r.recheck {
					s.record(Event{Kind: Blocked, Client: r.name})
				}
				r.recheck = false
				continue
			}
			t := time.NewTimer(d)
			select {
			case ev := <-s.events:
				s.apply(ev)
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			t.Stop()
			continue
		}
		s.drain()
		if s.observe != nil {
			s.record(Event{Kind: Observed, Value: s.observe()})
		}
		if s.allDone() {
			return nil
		}
		var ready, backing []*Client
		for _, c := range s.clients {
			if c.state == parked {
				if c.spun {
					backing = append(backing, c)
				} else {
					ready = append(ready, c)
				}
			}
		}
		if len(ready) == 0 { // only clients backing off: they may run again
			ready = backing
		}
		if len(ready) == 0 { // every live client is blocked inside the store
			t := time.NewTimer(s.opts.Stuck)
			select {
			case ev := <-s.events:
				s.apply(ev)
			case <-t.C:
				return fmt.Errorf("%w for %v: %s", ErrStuck, s.opts.Stuck, strings.Join(s.names(blocked), ", "))
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			t.Stop()
			continue
		}
		opts := make([]Option, 0, len(ready)+len(s.actions))
		for _, c := range ready {
			opts = append(opts, Option{Client: c.name, At: c.at})
		}
		var acts []*action
		s.mu.Lock()
		for _, a := range s.actions {
			if a.used < a.max && (a.when == nil || a.when()) {
				opts = append(opts, Option{Action: a.name})
				acts = append(acts, a)
			}
		}
		s.mu.Unlock()
		i := s.choose(opts)
		s.steps++
		if s.steps >= s.opts.MaxSteps {
			s.mu.Lock()
			s.free = true
			s.mu.Unlock()
			s.record(Event{Kind: Note, Stmt: fmt.Sprintf("%d decisions: every client now runs freely", s.steps)})
		}
		if i >= len(ready) {
			a := acts[i-len(ready)]
			s.record(Event{Kind: Acted, Action: a.name})
			a.f()
			s.mu.Lock()
			a.used++
			s.mu.Unlock()
			for _, c := range s.clients { // the world moved: nobody backs off
				c.spun = false
			}
			continue
		}
		for _, c := range s.clients { // another client moves: the others may retry
			if c != ready[i] {
				c.spun = false
			}
		}
		s.grant(ready[i])
	}
}

func (s *Scheduler) earliestRunning() *Client {
	var r *Client
	for _, c := range s.clients {
		if c.state == running && (r == nil || c.deadline.Before(r.deadline)) {
			r = c
		}
	}
	return r
}

func (s *Scheduler) drain() {
	for {
		select {
		case ev := <-s.events:
			s.apply(ev)
		default:
			return
		}
	}
}

func (s *Scheduler) apply(ev event) {
	c := ev.c
	c.recheck = false
	// The world moved: a client still being rechecked gets a full Block
	// from now to show that it was freed.
	for _, o := range s.clients {
		if o.recheck && o.state == running {
			o.deadline = time.Now().Add(s.opts.Block)
		}
	}
	if ev.done {
		c.state = done
		s.record(Event{Kind: Finished, Client: c.name})
		return
	}
	if s.isFree() {
		c.state, c.deadline = running, time.Now().Add(s.opts.Block)
		c.grant <- struct{}{}
		return
	}
	c.state, c.at = parked, ev.at
	// A turn from one round trip to the next made a round trip (a read,
	// then the write that follows it): progress, not a retry backing off.
	c.spun = c.from != "" && c.from == ev.at && ev.at != faults.BeforeRoundTrip
	s.record(Event{Kind: Parked, Client: c.name, Failpoint: ev.at})
}

func (s *Scheduler) grant(c *Client) {
	// A client blocked inside the store may be freed by what c does next
	// (a commit that releases a row lock): it is waited for again, so
	// whether it got through before the next choice does not depend on
	// how fast the machine is, only on whether it was freed.
	for _, o := range s.clients {
		if o.state == blocked {
			o.state, o.deadline, o.recheck = running, time.Now().Add(s.opts.Block), true
		}
	}
	c.state, c.deadline, c.lastRun, c.from = running, time.Now().Add(s.opts.Block), s.steps, c.at
	s.record(Event{Kind: Granted, Client: c.name, Failpoint: c.at})
	c.grant <- struct{}{}
}

func (s *Scheduler) allDone() bool {
	for _, c := range s.clients {
		if c.state != done {
			return false
		}
	}
	return true
}

func (s *Scheduler) names(st state) []string {
	var out []string
	for _, c := range s.clients {
		if c.state == st {
			out = append(out, c.name)
		}
	}
	return out
}

// lookup finds a client by name (for choosers that follow a script).
func (s *Scheduler) lookup(name string) *Client {
	for _, c := range s.clients {
		if c.name == name {
			return c
		}
	}
	return nil
}
