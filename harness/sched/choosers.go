package sched

import (
	"math/rand"
	"slices"
	"sync"

	"pgregory.net/rapid"
)

// Random picks uniformly with a seeded PRNG: the CLI's search. The same
// seed makes the same choices (runs differ only where a client blocked
// inside the store, whose timing decides who is parked).
type Random struct {
	r *rand.Rand
}

// NewRandom makes a Random chooser from seed.
func NewRandom(seed int64) *Random { return &Random{r: rand.New(rand.NewSource(seed))} }

// Choose picks an option uniformly.
func (c *Random) Choose(opts []Option) int { return c.r.Intn(len(opts)) }

// Rapid takes each choice from rapid's draws, so a failing property
// shrinks to the shortest interleaving: rapid shrinks draws toward 0, and
// option 0 is the first parked client (clients in the order they were
// registered; actions come after the clients), or a Pick's first value.
type Rapid struct {
	T *rapid.T
}

// Choose draws an option.
func (c Rapid) Choose(opts []Option) int {
	if len(opts) == 1 {
		return 0
	}
	label := "next"
	if opts[0].Pick != "" {
		label = opts[0].Pick
	}
	return rapid.IntRange(0, len(opts)-1).Draw(c.T, label)
}

// Recording wraps a chooser and keeps each choice made, as an index and the
// number of options, so the run can be replayed (and shrunk) with Replay.
type Recording struct {
	Next Chooser
	mu   sync.Mutex
	got  []int
}

// Choose asks the wrapped chooser and records the answer.
func (c *Recording) Choose(opts []Option) int {
	i := c.Next.Choose(opts)
	c.mu.Lock()
	c.got = append(c.got, i)
	c.mu.Unlock()
	return i
}

// Choices returns the choices made so far.
func (c *Recording) Choices() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.got...)
}

// Replay makes the recorded choices again; a choice out of range (the run
// went otherwise) and every choice after the list become 0, the first
// option: the same convention as rapid's shrinking.
type Replay struct {
	Choices []int
	i       int
}

// Choose returns the next recorded choice.
func (c *Replay) Choose(opts []Option) int {
	i := 0
	if c.i < len(c.Choices) {
		i = c.Choices[c.i]
	}
	c.i++
	if i < 0 || i >= len(opts) {
		return 0
	}
	return i
}

// RoundRobin lets the parked client that has waited longest run; it never
// takes an action, and picks the first value of a Pick. Demos finish their
// schedules with it.
type RoundRobin struct {
	s *Scheduler
}

func (c *RoundRobin) attach(s *Scheduler) { c.s = s }

// Choose picks the client that ran least recently.
func (c *RoundRobin) Choose(opts []Option) int {
	best, bestRun := 0, int(^uint(0)>>1)
	for i, o := range opts {
		if o.Client == "" {
			continue
		}
		run := -1
		if c.s != nil {
			if cl := c.s.lookup(o.Client); cl != nil {
				run = cl.lastRun
			}
		}
		if run < bestRun {
			best, bestRun = i, run
		}
	}
	return best
}

// Step is one step of a Script: let Client run until it waits at one of
// the Until failpoints (any failpoint when Until is empty: one turn; none
// when ToEnd), or finishes; or take Action.
type Step struct {
	Client string
	Until  []string
	ToEnd  bool
	Action string
}

// Script follows its steps, then lets the clients finish round-robin. A
// step whose client is blocked inside the store lets another client run
// (round-robin) until it is unblocked; a step whose client has finished, or
// whose action is not offered, is skipped.
type Script struct {
	Steps []Step
	// Then, if set, makes every choice after the steps, and every Pick
	// (the steps choose only interleavings): a scripted prefix to a
	// searched episode. Nil: round-robin, and a Pick's first value.
	Then    Chooser
	i       int
	started bool
	s       *Scheduler
	rr      RoundRobin
}

// NewScript makes a Script chooser.
func NewScript(steps ...Step) *Script { return &Script{Steps: steps} }

func (c *Script) attach(s *Scheduler) {
	c.s, c.rr.s = s, s
	if a, ok := c.Then.(attacher); ok {
		a.attach(s)
	}
}

// Choose follows the script.
func (c *Script) Choose(opts []Option) int {
	if len(opts) > 0 && opts[0].Pick != "" {
		if c.Then != nil {
			return c.Then.Choose(opts)
		}
		return 0
	}
	for c.i < len(c.Steps) {
		st := c.Steps[c.i]
		if st.Action != "" {
			c.i++
			for j, o := range opts {
				if o.Action == st.Action {
					return j
				}
			}
			continue
		}
		cl := c.s.lookup(st.Client)
		if cl == nil || cl.state == done {
			c.i, c.started = c.i+1, false
			continue
		}
		if cl.state != parked { // blocked inside the store: let another run
			return c.rr.Choose(opts)
		}
		if c.started && !st.ToEnd && (len(st.Until) == 0 || slices.Contains(st.Until, cl.at)) {
			c.i, c.started = c.i+1, false
			continue
		}
		c.started = true
		for j, o := range opts {
			if o.Client == st.Client {
				return j
			}
		}
		return c.rr.Choose(opts)
	}
	if c.Then != nil {
		return c.Then.Choose(opts)
	}
	return c.rr.Choose(opts)
}
