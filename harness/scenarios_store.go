package harness

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
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
	order []Order
}

// run starts n client slots; mk makes the client of a slot (again after it
// crashed). It returns when stop is closed and every slot has finished its
// current order.
func (l *load) run(ctx context.Context, n int, mk func(slot int) *Client, think time.Duration, stop <-chan struct{}) {
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
			c.GiveUp = unknownBudget(maxUnknown)
			if a := c.Submit(ctx, o); a.Err == "crashed" {
				c = mk(slot) // a crashed client is gone; a new one takes its place
			}
			_ = faults.Pause(ctx, think/2+l.env.jitter(think))
		}
	})
}

// unknownBudget returns a Client.GiveUp that stops retrying an order after
// n attempts ended without a known outcome (a timeout, a dropped
// connection): a real client reconciles such an order later rather than
// hammering an unreachable server, and each unknown outcome multiplies the
// orders porcupine must consider on its key. 409s do not count, nor calls
// that never reached the server.
func unknownBudget(n int) func(error) bool {
	count := 0
	return func(err error) bool {
		if errors.Is(err, stores.ErrInFlight) || errors.Is(err, stores.ErrFenced) || noEffect(err) {
			return false
		}
		count++
		return count >= n
	}
}

// maxUnknown is the fault scenarios' unknownBudget per order and client.
const maxUnknown = 3

// orders lists every order the load sent, in the order first sent.
func (l *load) orders() []Order {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Order(nil), l.order...)
}

// timedClient is a client of the fault scenarios: every store call has a
// deadline (callTimeout).
func (e *Env) timedClient(rules ...Rule) *Client {
	c := e.NewClient(rules...)
	c.Store = &Recorder{Store: withDeadline(e.Store, callTimeout), Client: c.ID, Hist: e.Hist, Clock: e.clock}
	return c
}

// settle is the quiet phase after the faults are healed: every order is
// sent once more, with the same key, by a fresh patient client, so every
// operation gets an answer and every answer given during the faults is
// compared with the one saved. It returns the orders still without a
// definite answer.
func settle(ctx context.Context, env *Env, orders []Order) []Order {
	var mu sync.Mutex
	var left []Order
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
			c := env.NewClient()
			c.Store = &Recorder{Store: withDeadline(env.Store, 5*time.Second), Client: c.ID, Hist: env.Hist, Clock: env.clock}
			c.MaxAttempts = 200
			if a := c.Submit(ctx, o); !a.definite() {
				mu.Lock()
				left = append(left, o)
				mu.Unlock()
			}
		}
	})
	sort.Slice(left, func(i, j int) bool { return left[i].ID < left[j].ID })
	return left
}

// runStoreFaults: clients send paced orders while the server is paused
// (longer than LockTTL, so claims go stale while it is frozen), then killed
// with SIGKILL and started again. Calls during the outages end without an
// answer (unknown outcomes) or fail before reaching the server (left out),
// and clients retry or give up. Once the server is healed, every order is
// sent again until it has an answer: a claim or a saved answer that the
// restart lost shows as a fresh claim of a key that existed.
func runStoreFaults(ctx context.Context, env *Env) {
	sf, err := NewServerFaults(env.opts.Server)
	if err != nil {
		env.fail("%v", err)
		return
	}
	defer sf.Close()
	ttl := env.Config.LockTTL
	r := planRand(env, "store-faults")
	jitter := func(d time.Duration) time.Duration { return time.Duration(r.Int63n(int64(d) + 1)) }
	pauseAt := ttl + jitter(ttl)
	pauseFor := 2*ttl + jitter(ttl)
	restartAt := pauseAt + pauseFor + ttl + jitter(ttl)
	env.note("%s: +%v pause the %s server for %v", env.Tenant, pauseAt.Round(time.Millisecond), sf.srv.Kind, pauseFor.Round(time.Millisecond))
	env.note("%s: +%v kill the %s server (SIGKILL) and start it again", env.Tenant, restartAt.Round(time.Millisecond), sf.srv.Kind)

	stop := make(chan struct{})
	l := &load{env: env}
	var loaded sync.WaitGroup
	loaded.Add(1)
	go func() {
		defer loaded.Done()
		l.run(ctx, env.Clients, func(int) *Client { return env.timedClient() }, 2*ttl/5, stop)
	}()
	begun := time.Now()
	injected := func() bool {
		if faults.Pause(ctx, time.Until(begun.Add(pauseAt))) != nil {
			return false
		}
		f := Fault{Client: -1, Kind: FaultServerPause, Failpoint: "server", Start: env.Hist.Now()}
		if err := sf.Pause(ctx); err != nil {
			env.fail("%v", err)
			return false
		}
		_ = faults.Pause(ctx, pauseFor)
		err := sf.Resume(context.WithoutCancel(ctx))
		f.End = env.Hist.Now()
		env.Hist.AddFault(f)
		if err != nil {
			env.fail("%v", err)
			return false
		}
		if faults.Pause(ctx, time.Until(begun.Add(restartAt))) != nil {
			return false
		}
		f = Fault{Client: -1, Kind: FaultServerRestart, Failpoint: "server", Start: env.Hist.Now()}
		down, err := sf.Restart(ctx)
		f.End = env.Hist.Now()
		env.Hist.AddFault(f)
		if err != nil {
			env.fail("%v", err)
			return false
		}
		_ = down // the outage's length is in the fault's Start and End
		return true
	}()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	if err := sf.Heal(hctx); err != nil {
		env.fail("healing the server: %v", err)
	}
	cancel()
	if injected {
		_ = faults.Pause(ctx, 2*ttl) // load on the healed server
	}
	close(stop)
	loaded.Wait()
	if left := settle(ctx, env, l.orders()); len(left) > 0 {
		env.fail("%d orders without an answer after the faults were healed (first %s)", len(left), left[0].ID)
	}
}
