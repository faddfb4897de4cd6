package scenario

import (
	"context"
	"sort"
	"sync"
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
			if a := c.Submit(ctx, o); a.Err == "crashed" {
				c = mk(slot) // a crashed client is gone; a new one takes its place
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
func underLoad(ctx context.Context, env *Env, inject func() bool, heal func()) {
	ttl := env.Config.LockTTL
	l := &load{env: env}
	stop := l.start(ctx, func(int) *workload.Client { return env.timedClient() }, 2*ttl/5)
	injected := inject()
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
