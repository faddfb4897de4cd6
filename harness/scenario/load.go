package scenario

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/workload"
)

// callTimeout bounds each store call of the fault scenarios' clients, as a
// real client's request timeout does: a call to a frozen server ends with
// an unknown outcome, and the client retries.
const callTimeout = 300 * time.Millisecond

// load runs paced orders on in-process clients until stop is closed. The
// clients come in pairs; both clients of a pair send the same orders at
// about the same time, so their keys race, and each order has two answers
// to compare.
type load struct {
	env   *Env
	mu    sync.Mutex
	seen  map[string]bool
	order []workload.Order
	// fresh is when the latest order the store answered afresh (its
	// work ran, no replay, no error) was sent, in Unix nanoseconds: the
	// store acknowledged a claim sent then or later (see freshSince).
	fresh atomic.Int64
}

// freshSince reports whether an order sent at t or later was answered
// afresh: the store acknowledged at least one claim made after t.
func (l *load) freshSince(t time.Time) bool { return l.fresh.Load() >= t.UnixNano() }

// waitFresh waits up to max for an order sent at t or later to be
// answered afresh (freshSince), and reports whether one was. The
// replicated scenarios hold a fault this way: a round whose primary
// acknowledged nothing while its standby was behind has nothing a
// failover could lose, and judges nothing about the replication.
func (l *load) waitFresh(ctx context.Context, t time.Time, max time.Duration) bool {
	deadline := time.Now().Add(max)
	for !l.freshSince(t) {
		left := time.Until(deadline)
		if left <= 0 || faults.Pause(ctx, min(left, 10*time.Millisecond)) != nil {
			return l.freshSince(t)
		}
	}
	return true
}

// start runs the load (see run) with the run's client count on a
// goroutine of its own; the returned stop ends it and returns once every
// client has returned.
func (l *load) start(ctx context.Context, mk func(slot int) *workload.Client, think time.Duration) (stop func()) {
	ch, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx, l.env.Clients, mk, think, ch)
	}()
	return func() { close(ch); <-done }
}

// run starts n client slots; mk makes the client of a slot (again after it
// crashed). It returns when stop is closed and every slot has finished its
// current order.
func (l *load) run(ctx context.Context, n int, mk func(slot int) *workload.Client, think time.Duration, stop <-chan struct{}) {
	l.mu.Lock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.mu.Unlock()
	streams := (n + 1) / 2
	parallel(n, func(slot int) {
		c := mk(slot)
		for j := 0; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			if ctx.Err() != nil {
				return
			}
			o := l.env.Order(j*streams+slot/2, "")
			l.mu.Lock()
			if !l.seen[o.ID] {
				l.seen[o.ID] = true
				l.order = append(l.order, o)
			}
			l.mu.Unlock()
			c.GiveUp = workload.UnknownBudget(maxUnknown)
			sent := time.Now().UnixNano()
			a := c.Submit(ctx, o)
			if a.Err == "crashed" {
				c = mk(slot) // a crashed client is gone; a new one takes its place
			}
			if a.Err == "" && !a.Replayed {
				for {
					last := l.fresh.Load()
					if last >= sent || l.fresh.CompareAndSwap(last, sent) {
						break
					}
				}
			}
			_ = faults.Pause(ctx, think/2+l.env.Jitter(think))
		}
	})
}

// maxUnknown is the fault scenarios' UnknownBudget per order and client.
const maxUnknown = 3

// orders lists every order the load sent, in the order first sent.
func (l *load) orders() []workload.Order {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]workload.Order(nil), l.order...)
}

// timedClient is a client of the fault scenarios: every store call has a
// deadline (callTimeout).
func (e *Env) timedClient(rules ...workload.Rule) *workload.Client {
	c := e.NewClient(rules...)
	c.Store = e.Recorder(c.ID, workload.WithDeadline(e.Store, callTimeout), e.clock)
	return c
}

// underLoad runs the fault scenarios' shape: timed clients as a paced
// load while inject runs the faults (it reports whether one was injected),
// then heal (which reports its own failure), two LockTTLs more of load on
// the healed system when a fault was injected, and every order settled
// (see settle): an order still without an answer is a failure.
func underLoad(ctx context.Context, env *Env, inject func(l *load) bool, heal func()) {
	ttl := env.Config.LockTTL
	l := &load{env: env}
	stop := l.start(ctx, func(int) *workload.Client { return env.timedClient() }, 2*ttl/5)
	injected := inject(l)
	heal()
	if injected {
		_ = faults.Pause(ctx, 2*ttl) // load on the healed system
	}
	stop()
	if left := settle(ctx, env, l.orders()); len(left) > 0 {
		env.Fail("%d orders without an answer after the faults were healed (first %s)", len(left), left[0].ID)
	}
}

// settleBudget bounds the quiet phase (see settle).
const settleBudget = 90 * time.Second

// settle is the quiet phase after the faults are healed: every order is
// sent once more, with the same key, by a fresh patient client, so every
// operation gets an answer and every answer given during the faults is
// compared with the one saved. It returns the orders still without a
// definite answer. It is bounded by settleBudget: a server that never came
// back would otherwise take 200 attempts of every order (80,000 unknown
// calls for 400 orders, seen in a Postgres soak at a load of 30), and the
// orders not answered in time are returned, so the run is undecided.
func settle(ctx context.Context, env *Env, orders []workload.Order) []workload.Order {
	ctx, cancel := context.WithTimeout(ctx, settleBudget)
	defer cancel()
	var mu sync.Mutex
	var left []workload.Order
	next := 0
	n := env.Clients
	if n < 1 {
		n = 1
	}
	parallel(n, func(int) {
		for {
			mu.Lock()
			if next >= len(orders) {
				mu.Unlock()
				return
			}
			o := orders[next]
			next++
			mu.Unlock()
			if ctx.Err() != nil {
				mu.Lock()
				left = append(left, o)
				mu.Unlock()
				continue
			}
			c := env.NewClient()
			c.Store = env.Recorder(c.ID, workload.WithDeadline(env.Store, 5*time.Second), env.clock)
			c.MaxAttempts = 200
			if a := c.Submit(ctx, o); !a.Definite() {
				mu.Lock()
				left = append(left, o)
				mu.Unlock()
			}
		}
	})
	sort.Slice(left, func(i, j int) bool { return left[i].ID < left[j].ID })
	return left
}
