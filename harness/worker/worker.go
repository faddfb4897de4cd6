// Package worker runs clients in worker processes (`idemcheck worker`) that
// the harness can kill with SIGKILL at any moment: the parent side (Worker,
// Pool), the child side (Main) and the line protocol between them
// (proto.go). A worker's history streams to the harness's one History, on
// the same monotonic clock, so a call cut short by a kill is recorded as an
// unknown outcome.
package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// Worker is one worker process (`idemcheck worker`): a client that runs in
// its own process against the scenario's store (the same SQLite file, the
// same Postgres schema or Redis namespace) and reports its history back as
// it goes. The harness can kill it with SIGKILL at any moment, or at a
// failpoint it announced: its calls in flight become unknown outcomes, its
// work stops where it was, and its claims stay behind for others to take
// over after LockTTL.
type Worker struct {
	// ID is the worker's client id in the history.
	ID int

	hist    *history.History
	ledger  *history.Ledger
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	wmu     sync.Mutex // serializes lines to stdin
	decide  func(w *Worker, name string, key stores.KeyRef) Action
	onCall  func(w *Worker, op history.Op) bool
	ready   chan error
	exited  chan struct{}
	stderr  tailBuffer
	started time.Time

	mu        sync.Mutex
	pending   map[int64]announced // announced calls without a return yet, by the worker's sequence
	work      map[int]int         // the worker's work index -> the history's
	open      map[int]bool        // history indices of work not ended
	submitted []workload.Order
	answered  map[string]bool // orders with a definite answer
	nanswers  int             // answers of any kind
	key       stores.KeyRef   // the key of its latest call
	killed    bool
	kill      history.Fault // the kill, when killed
	exitErr   error
	answers   chan struct{} // signalled on every answer
}

// Action is the harness's decision at a failpoint a worker announced.
type Action struct {
	// Kill the worker there with SIGKILL.
	Kill bool
	// Hold it there this long (a GC pause, a stalled disk), then let it go.
	Hold time.Duration
}

// Options tune a worker process and how the harness treats it.
type Options struct {
	// Announce lists the failpoints at which the worker stops and asks
	// Decide what to do.
	Announce []string
	// CallTimeout bounds each store call of the worker (0: none).
	CallTimeout time.Duration
	// MaxUnknown gives up an order after this many attempts without a
	// known outcome (0: no limit); see workload.UnknownBudget.
	MaxUnknown int
	// Decide is asked at each announced failpoint; nil lets it go on.
	Decide func(w *Worker, name string, key stores.KeyRef) Action
	// OnCall, if set, hears each store call the worker is about to make
	// (the call line arrives just before the call); true kills the worker
	// at once, so the call may or may not reach the store: an unknown
	// outcome for real.
	OnCall func(w *Worker, op history.Op) bool
	// StartPatience is how long a Pool tries again to start a worker
	// whose start failed (the server down or paused, so its store could
	// not be opened within StartTimeout); 0: DefaultStartPatience. A
	// scenario whose faults may keep the server away longer (their
	// lengths scale with LockTTL) sets it to cover them: at a LockTTL of
	// 30 s, chaos paused a Postgres server for 57 s, a killed worker's
	// replacement gave up after the minute, and a correct store's run
	// ended undecided.
	StartPatience time.Duration
}

// Spec is what a worker process is started with: the command (argv of
// `idemcheck worker`, or of a test binary acting as one), the history and
// ledger it reports into, and its setup line (Start fills in the clock and
// the Options' part).
type Spec struct {
	Command []string
	Hist    *history.History
	Ledger  *history.Ledger
	Setup   Setup
}

// StartTimeout bounds starting a worker and opening its store.
const StartTimeout = 30 * time.Second

// Start starts a worker process and waits until it has opened the store.
// The worker is killed when ctx ends.
func Start(ctx context.Context, spec Spec, wo Options) (*Worker, error) {
	if len(spec.Command) == 0 {
		return nil, errors.New("no worker command")
	}
	id := spec.Setup.Client
	setup := spec.Setup
	setup.MonoStart = spec.Hist.MonoStart()
	setup.Announce, setup.CallTimeout, setup.MaxUnknown = wo.Announce, wo.CallTimeout, wo.MaxUnknown
	argv := spec.Command
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), EnvVar+"=1")
	// Its own process group: a Ctrl-C at the terminal stops the harness,
	// which then kills its workers, rather than killing them under it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w := &Worker{ID: id, hist: spec.Hist, ledger: spec.Ledger, cmd: cmd, decide: wo.Decide, onCall: wo.OnCall,
		ready: make(chan error, 1), exited: make(chan struct{}),
		pending: map[int64]announced{}, work: map[int]int{}, open: map[int]bool{}, answered: map[string]bool{},
		answers: make(chan struct{}, 1)}
	cmd.Stderr = &w.stderr
	var err error
	if w.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", argv[0], err)
	}
	w.started = time.Now()
	go w.read(stdout)
	go func() {
		select {
		case <-ctx.Done():
			w.abort()
		case <-w.exited:
		}
	}()
	w.send(toWorker{Setup: &setup})
	t := time.NewTimer(StartTimeout)
	defer t.Stop()
	select {
	case err := <-w.ready:
		if err != nil {
			select { // it exits by itself after reporting the error
			case <-w.exited:
			case <-time.After(5 * time.Second):
				w.abort()
				<-w.exited
			}
			return nil, err
		}
		return w, nil
	case <-t.C:
		w.abort()
		<-w.exited
		return nil, fmt.Errorf("worker %d did not open its store within %v", id, StartTimeout)
	}
}

// send writes one line to the worker; a dead worker's pipe is ignored.
func (w *Worker) send(m toWorker) { writeLine(&w.wmu, w.stdin, m) }

// Submit gives the worker an order; it runs its orders in turn.
func (w *Worker) Submit(o workload.Order) {
	w.mu.Lock()
	w.submitted = append(w.submitted, o)
	w.mu.Unlock()
	w.send(toWorker{Order: &o})
}

// Close tells the worker there are no more orders: it finishes those it
// has and exits. Wait for it with Done.
func (w *Worker) Close() { w.send(toWorker{Close: true}) }

// Done is closed once the worker has exited and its history is recorded.
func (w *Worker) Done() <-chan struct{} { return w.exited }

// Answered is signalled (without blocking, so it may coalesce) each time
// the worker reports an answer.
func (w *Worker) Answered() <-chan struct{} { return w.answers }

// Killed reports whether the harness killed the worker.
func (w *Worker) Killed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.killed
}

// Err is why the worker exited on its own with an error (nil if it exited
// cleanly or was killed); valid once Done is closed.
func (w *Worker) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exitErr
}

// Busy reports whether the worker has orders it has not answered yet (it
// runs them one at a time, each to an answer: a response, or giving up).
func (w *Worker) Busy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nanswers < len(w.submitted)
}

// Backlog is how many orders the worker was given and has not answered
// (the one in hand among them): a feeder that keeps it small keeps a
// worker that faults have slowed from piling up orders it will run long
// after the faults.
func (w *Worker) Backlog() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.submitted) - w.nanswers
}

// Unanswered lists the orders given to the worker that have no definite
// answer from it (yet).
func (w *Worker) Unanswered() []workload.Order {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []workload.Order
	seen := map[string]bool{}
	for _, o := range w.submitted {
		if !w.answered[o.ID] && !seen[o.ID] {
			seen[o.ID] = true
			out = append(out, o)
		}
	}
	return out
}

// Kill kills the worker with SIGKILL now, at the named failpoint on key if
// it stopped at one (else wherever it is), and records the fault. It is a
// no-op once the worker has been killed or has exited, and then reports
// false: a kill meant to interrupt something did not.
func (w *Worker) Kill(failpoint string, key stores.KeyRef) bool {
	w.mu.Lock()
	select {
	case <-w.exited:
		w.mu.Unlock()
		return false
	default:
	}
	if w.killed {
		w.mu.Unlock()
		return false
	}
	if key == (stores.KeyRef{}) {
		key = w.key
	}
	w.killed = true
	w.kill = history.Fault{Client: w.ID, Key: key, Kind: history.FaultWorkerKill, Failpoint: failpoint, Start: w.hist.Now()}
	w.mu.Unlock()
	_ = w.cmd.Process.Kill() // SIGKILL: no cleanup, no last words
	return true
}

// abort kills the worker without counting it as an injected fault: it
// failed to start, or the run is over. Its calls in flight are still
// recorded as unknown outcomes.
func (w *Worker) abort() {
	w.mu.Lock()
	select {
	case <-w.exited:
		w.mu.Unlock()
		return
	default:
	}
	w.killed = true
	w.mu.Unlock()
	_ = w.cmd.Process.Kill()
}

// read handles the worker's lines until it exits, then records what was
// left in flight.
func (w *Worker) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	readyDone := false
	for sc.Scan() {
		var m fromWorker
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			w.setErr(fmt.Errorf("worker %d: bad line %.80q: %v", w.ID, sc.Text(), err))
			continue
		}
		switch {
		case m.Ready:
			if !readyDone {
				readyDone = true
				w.ready <- nil
			}
		case m.Error != "":
			w.setErr(errors.New(m.Error))
			if !readyDone {
				readyDone = true
				w.ready <- errors.New(m.Error)
			}
		default:
			w.handle(m)
		}
	}
	waitErr := w.cmd.Wait()
	w.finish(waitErr)
	if !readyDone {
		w.ready <- fmt.Errorf("worker %d exited before opening its store (%v): %s", w.ID, waitErr, w.stderr.String())
	}
}

func (w *Worker) setErr(err error) {
	w.mu.Lock()
	if w.exitErr == nil {
		w.exitErr = err
	}
	w.mu.Unlock()
}

func (w *Worker) handle(m fromWorker) {
	h := w.hist
	switch {
	case m.Call != nil:
		op := m.Call.Op
		op.Client = w.ID
		op.Input.ID = h.NextID() // ids are unique across the whole history
		seq := h.Announce(op)
		w.mu.Lock()
		w.pending[m.Call.Seq] = announced{op, seq}
		if op.Input.Key != (stores.KeyRef{}) {
			w.key = op.Input.Key
		}
		w.mu.Unlock()
		if w.onCall != nil && w.onCall(w, op) {
			w.Kill("", op.Input.Key)
		}
	case m.Ret != nil:
		w.mu.Lock()
		call, ok := w.pending[m.Ret.Seq]
		delete(w.pending, m.Ret.Seq)
		w.mu.Unlock()
		if !ok {
			return
		}
		op := m.Ret.Op
		op.Client, op.Input.ID = w.ID, call.op.Input.ID
		h.Returned(call.seq, op, m.Ret.Drop)
	case m.Work != nil:
		run := m.Work.Run
		run.Client = w.ID
		i := h.AddWork(run)
		w.mu.Lock()
		w.work[m.Work.Seq] = i
		w.open[i] = true
		w.mu.Unlock()
	case m.WorkEnd != nil:
		w.mu.Lock()
		i, ok := w.work[m.WorkEnd.Seq]
		delete(w.open, i)
		w.mu.Unlock()
		if ok {
			h.EndWorkAt(i, m.WorkEnd.End, m.WorkEnd.Failed, m.WorkEnd.ChargeID)
		}
	case m.Answer != nil:
		a := *m.Answer
		a.Client = w.ID
		h.AddAnswer(a)
		w.mu.Lock()
		w.nanswers++
		if a.Definite() {
			w.answered[a.Order] = true
		}
		w.mu.Unlock()
		select {
		case w.answers <- struct{}{}:
		default:
		}
	case m.Fault != nil:
		f := *m.Fault
		f.Client = w.ID
		h.AddFault(f)
	case m.Charge != nil:
		// The provider charges when the request reaches it, whether or not
		// the worker lives to hear the answer.
		id := w.ledger.Charge(m.Charge.Order, m.Charge.Key, w.ID, h.Now())
		w.send(toWorker{Charge: &chargeReply{Seq: m.Charge.Seq, ID: id}})
	case m.Failpoint != nil:
		go w.atFailpoint(*m.Failpoint)
	}
}

// atFailpoint asks the scenario what the worker stopped at the failpoint
// does, and does it.
func (w *Worker) atFailpoint(ev failpointEvent) {
	var act Action
	if w.decide != nil {
		act = w.decide(w, ev.Name, ev.Key)
	}
	switch {
	case act.Kill:
		w.Kill(ev.Name, ev.Key)
		return
	case act.Hold > 0:
		f := history.Fault{Client: w.ID, Key: ev.Key, Kind: history.FaultPause, Failpoint: ev.Name, Start: w.hist.Now()}
		select {
		case <-time.After(act.Hold):
		case <-w.exited:
		}
		f.End = w.hist.Now()
		w.hist.AddFault(f)
	}
	w.send(toWorker{Go: ev.Seq})
}

// announced is a call a worker announced: the op, and its sequence in
// the harness's history (History.Announce).
type announced struct {
	op  history.Op
	seq int64
}

// finish records the end of the worker: calls still in flight are unknown
// outcomes, work still running stopped when the process died, and a kill
// is recorded as a fault.
func (w *Worker) finish(waitErr error) {
	h := w.hist
	dead := h.Now()
	w.mu.Lock()
	killed, kill := w.killed, w.kill
	pending := w.pending
	w.pending = map[int64]announced{}
	open := w.open
	w.open = map[int]bool{}
	if !killed && waitErr != nil && w.exitErr == nil {
		w.exitErr = fmt.Errorf("worker %d died: %v: %s", w.ID, waitErr, w.stderr.String())
	}
	w.mu.Unlock()
	why := "worker killed (SIGKILL)"
	if !killed {
		why = fmt.Sprintf("worker exited (%v)", waitErr)
	}
	for _, call := range pending {
		op := call.op
		op.Output.Unknown, op.Return, op.Err = true, history.Never, why
		h.Returned(call.seq, op, false)
	}
	for i := range open {
		h.EndWorkAt(i, dead, true, "")
	}
	if killed && kill.Kind != "" {
		kill.End = dead
		h.AddFault(kill)
	}
	close(w.exited)
}

// tailBuffer keeps the first and the last 2 KiB written to it (a
// worker's stderr): a crash's cause is in its first lines
// ("runtime/cgo: pthread_create failed", a panic's message), and the last
// 4 KiB alone held only the end of its goroutine dump.
type tailBuffer struct {
	mu      sync.Mutex
	head    []byte
	buf     []byte // the tail
	dropped int    // bytes between head and tail
}

// tailKeep is how much of each end a tailBuffer keeps.
const tailKeep = 2048

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := tailKeep - len(b.head); room > 0 {
		take := min(room, len(p))
		b.head = append(b.head, p[:take]...)
		p = p[take:]
	}
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - tailKeep; over > 0 {
		b.buf = b.buf[over:]
		b.dropped += over
	}
	return n, nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if b.dropped == 0 {
		return words(string(b.head) + string(b.buf))
	}
	return fmt.Sprintf("%s … (%d bytes) … %s", words(string(b.head)), b.dropped, words(string(b.buf)))
}
