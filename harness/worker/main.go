package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sync"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// errParentGone: the harness closed the worker's stdin without saying
// "close" (it died, or killed the run): the worker stops.
var errParentGone = errors.New("the harness went away")

// Main is the body of a worker process (`idemcheck worker`): it reads a
// Setup and orders from stdin, runs the orders as one client on the store
// the setup names, and writes its history to stdout as JSON lines (the
// protocol of proto.go). It returns the process's exit code:
// 0 after a "close" line and the last order, 1 if the harness went away,
// 2 if the setup was bad or the store could not be opened. The store
// backends it can open are those linked into the program.
func Main(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) int {
	out := &lineWriter{w: stdout}
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 64<<10), 8<<20)
	fail := func(format string, args ...any) int {
		msg := fmt.Sprintf(format, args...)
		out.send(fromWorker{Error: msg})
		fmt.Fprintln(stderr, "idemcheck worker: "+msg)
		return 2
	}
	if !in.Scan() {
		return fail("no setup line on stdin")
	}
	var first toWorker
	if err := json.Unmarshal(in.Bytes(), &first); err != nil || first.Setup == nil {
		return fail("the first line must be a setup: %.80q", in.Text())
	}
	setup := *first.Setup
	b, err := stores.Lookup(setup.Backend)
	if err != nil {
		return fail("%v", err)
	}
	octx, cancel := context.WithTimeout(ctx, StartTimeout)
	st, err := b.Open(octx, setup.Addr, setup.Config)
	cancel()
	if err != nil {
		return fail("open %s store: %v", setup.Backend, err)
	}
	defer st.Close()

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	hist := history.FromMono(setup.MonoStart, out)
	waits := &waiter{m: map[int64]chan string{}, gone: make(chan struct{})}
	announce := map[string]bool{}
	for _, n := range setup.Announce {
		announce[n] = true
	}
	c := &workload.Client{
		ID: setup.Client, Clock: faults.RealClock{}, Hist: hist,
		Store:           &history.Recorder{Store: workload.WithDeadline(st, setup.CallTimeout), Client: setup.Client, Hist: hist, Clock: faults.RealClock{}},
		Policy:          setup.Policy,
		Keys:            setup.Keys,
		DownstreamKeyed: setup.DownstreamKeyed,
		DownstreamByKey: setup.DownstreamByKey,
		FirstWorkTime:   setup.FirstWorkTime,
		MaxAttempts:     setup.MaxAttempts,
		Backoff:         setup.Backoff,
		MaxBackoff:      setup.MaxBackoff,
		WorkTime:        setup.WorkTime,
		Rand:            rand.New(rand.NewSource(setup.Seed)),
		Faults:          &announcer{names: announce, out: out, hist: hist, waits: waits},
		Charge: func(order, key string, client int, at int64) string {
			seq, ch := waits.add()
			out.send(fromWorker{Charge: &chargeEvent{Seq: seq, Order: order, Key: key, At: at}})
			id, _ := waits.wait(ctx, seq, ch) // the harness charged even if we never hear back
			return id
		},
	}
	// The reader never waits for the orders to be run: the harness's
	// go and charge lines come on the same stdin, behind the orders, and
	// the order in hand waits for them. A bounded queue here deadlocked
	// a run whose harness fed orders faster than a slowed worker ran
	// them (the reader blocked on the full queue, the order in hand on
	// a go unread behind it, the harness on the full pipe).
	orders := newOrderQueue()
	go func() {
		defer orders.close()
		// After "close" the harness still answers failpoints and charges:
		// read until stdin ends.
		for in.Scan() {
			var m toWorker
			if err := json.Unmarshal(in.Bytes(), &m); err != nil {
				fmt.Fprintf(stderr, "idemcheck worker: bad line %.80q: %v\n", in.Text(), err)
				continue
			}
			switch {
			case m.Order != nil:
				orders.push(*m.Order)
			case m.Go != 0:
				waits.deliver(m.Go, "")
			case m.Charge != nil:
				waits.deliver(m.Charge.Seq, m.Charge.ID)
			case m.Close:
				orders.close()
			}
		}
		// stdin ended: the harness is gone, nobody is listening any more.
		waits.abandon()
		stop()
	}()
	out.send(fromWorker{Ready: true})
	for {
		o, ok := orders.pop()
		if !ok || ctx.Err() != nil {
			break
		}
		if setup.MaxUnknown > 0 {
			c.GiveUp = workload.UnknownBudget(setup.MaxUnknown)
		}
		c.Submit(ctx, o)
	}
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

// orderQueue is the worker's orders, in the order they came: push never
// waits (the harness bounds how many it gives a worker), pop waits for
// one, and after close pop drains what is left and then says no more
// (orders after close are dropped).
type orderQueue struct {
	mu     sync.Mutex
	more   *sync.Cond
	q      []workload.Order
	closed bool
}

func newOrderQueue() *orderQueue {
	o := &orderQueue{}
	o.more = sync.NewCond(&o.mu)
	return o
}

func (o *orderQueue) push(x workload.Order) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.q = append(o.q, x)
		o.more.Signal()
	}
}

func (o *orderQueue) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.more.Broadcast()
}

func (o *orderQueue) pop() (workload.Order, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.q) == 0 && !o.closed {
		o.more.Wait()
	}
	if len(o.q) == 0 {
		return workload.Order{}, false
	}
	x := o.q[0]
	o.q[0] = workload.Order{}
	o.q = o.q[1:]
	return x, true
}

// lineWriter writes JSON lines, one write per line, so every line that was
// written before the process is killed reaches the harness whole. It is
// also the worker history's sink: every record goes to the harness.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

var _ history.Sink = (*lineWriter)(nil)

func (l *lineWriter) send(m fromWorker) { writeLine(&l.mu, l.w, m) }

// Call announces a store call before it is made.
func (l *lineWriter) Call(seq int64, op history.Op) {
	l.send(fromWorker{Call: &opEvent{Seq: seq, Op: op}})
}

// Return reports how a call returned, or that it never reached the store.
func (l *lineWriter) Return(seq int64, op history.Op, drop bool) {
	if drop {
		l.send(fromWorker{Ret: &opEvent{Seq: seq, Drop: true}})
		return
	}
	l.send(fromWorker{Ret: &opEvent{Seq: seq, Op: op}})
}

// Work reports that the work started.
func (l *lineWriter) Work(i int, w history.WorkRun) {
	l.send(fromWorker{Work: &workEvent{Seq: i, Run: w}})
}

// WorkEnd reports that the work ended.
func (l *lineWriter) WorkEnd(i int, end int64, failed bool, id string) {
	l.send(fromWorker{WorkEnd: &workEndEvent{Seq: i, End: end, Failed: failed, ChargeID: id}})
}

// Fault reports a fault.
func (l *lineWriter) Fault(f history.Fault) { l.send(fromWorker{Fault: &f}) }

// Answer reports a final answer.
func (l *lineWriter) Answer(a history.Answer) { l.send(fromWorker{Answer: &a}) }

// waiter matches the harness's replies (go, charge) to the requests the
// worker is blocked on.
type waiter struct {
	mu   sync.Mutex
	seq  int64
	m    map[int64]chan string
	gone chan struct{}
	once sync.Once
}

func (w *waiter) add() (int64, chan string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	ch := make(chan string, 1)
	w.m[w.seq] = ch
	return w.seq, ch
}

func (w *waiter) deliver(seq int64, v string) {
	w.mu.Lock()
	ch := w.m[seq]
	delete(w.m, seq)
	w.mu.Unlock()
	if ch != nil {
		ch <- v
	}
}

func (w *waiter) wait(ctx context.Context, seq int64, ch chan string) (string, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-w.gone:
		return "", errParentGone
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (w *waiter) abandon() { w.once.Do(func() { close(w.gone) }) }

// announcer is the worker's failpoint handler: at an announced failpoint it
// tells the harness and waits to be let go (or killed).
type announcer struct {
	names map[string]bool
	out   *lineWriter
	hist  *history.History
	waits *waiter
}

func (a *announcer) Hit(ctx context.Context, name string) error {
	if !a.names[name] {
		return nil
	}
	seq, ch := a.waits.add()
	a.out.send(fromWorker{Failpoint: &failpointEvent{Seq: seq, Name: name, Key: workload.KeyOf(ctx), At: a.hist.Now()}})
	_, err := a.waits.wait(ctx, seq, ch)
	return err
}
