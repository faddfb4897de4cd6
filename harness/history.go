// Package harness runs stores under concurrent clients and faults, records
// what every client saw, and checks the record: the workload, the history,
// the checkers, the scenarios and the runner.
package harness

import (
	"context"
	"errors"
	"math"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Never is the return time of a call whose outcome is unknown: it may take
// effect at any moment after its call.
const Never = int64(math.MaxInt64)

// Op is one store call as a client saw it. Times are nanoseconds since the
// history began, read from one monotonic clock.
type Op struct {
	Client int           `json:"client"`
	Input  models.Input  `json:"input"`
	Output models.Output `json:"output"`
	Call   int64         `json:"call"`
	Return int64         `json:"return"` // Never when the outcome is unknown
	Err    string        `json:"err,omitempty"`
}

// WorkRun is one execution of an order's work by an owner.
type WorkRun struct {
	Client   int           `json:"client"`
	Key      stores.KeyRef `json:"key"`
	Order    string        `json:"order"`
	Token    stores.Token  `json:"token"`
	Start    int64         `json:"start"`
	End      int64         `json:"end"` // Never if the owner stopped inside the work
	Failed   bool          `json:"failed,omitempty"`
	ChargeID string        `json:"charge_id,omitempty"`
}

// Fault is one injected fault: a client paused or crashed at a failpoint.
type Fault struct {
	Client    int           `json:"client"`
	Key       stores.KeyRef `json:"key"`
	Kind      string        `json:"kind"` // "pause" | "crash"
	Failpoint string        `json:"failpoint"`
	Start     int64         `json:"start"`
	End       int64         `json:"end"`
}

// Answer is what a client finally got for one logical operation, after
// its retries: the response, or the error that ended it.
type Answer struct {
	Client      int             `json:"client"`
	Key         stores.KeyRef   `json:"key"`
	Order       string          `json:"order"`
	Fingerprint string          `json:"fingerprint"`
	Response    stores.Response `json:"response"`
	Status      int             `json:"status"` // HTTP status of the final answer
	Replayed    bool            `json:"replayed,omitempty"`
	Attempts    int             `json:"attempts"`
	Err         string          `json:"err,omitempty"`
	At          int64           `json:"at"`
}

// History is the record of one scenario. It is safe for concurrent use.
type History struct {
	start   time.Time
	mu      sync.Mutex
	ops     []Op
	work    []WorkRun
	faults  []Fault
	answers []Answer
	nextID  int
	// sink, when set, hears each record as it is made: a worker process
	// streams its history to the harness this way (workers_main.go).
	sink historySink
}

// NewHistory starts an empty history; its clock starts now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the history's monotonic clock: nanoseconds since it began.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

func (h *History) id() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	return h.nextID
}

func (h *History) addOp(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// AddWork records one execution of work and returns its index, so the
// caller can close it with EndWork.
func (h *History) AddWork(w WorkRun) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.work = append(h.work, w)
	if h.sink != nil {
		h.sink.work(len(h.work)-1, w)
	}
	return len(h.work) - 1
}

// EndWork records that work i ended.
func (h *History) EndWork(i int, failed bool, chargeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.work[i].End, h.work[i].Failed, h.work[i].ChargeID = h.Now(), failed, chargeID
	if h.sink != nil {
		h.sink.workEnd(i, h.work[i].End, failed, chargeID)
	}
}

// AddFault records an injected fault.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	if h.sink != nil {
		h.sink.fault(f)
	}
	h.mu.Unlock()
}

// AddAnswer records a client's final answer for an operation.
func (h *History) AddAnswer(a Answer) {
	h.mu.Lock()
	h.answers = append(h.answers, a)
	if h.sink != nil {
		h.sink.answer(a)
	}
	h.mu.Unlock()
}

// OpCount is the number of store calls recorded so far.
func (h *History) OpCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Ops returns the store calls sorted by call time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]Op(nil), h.ops...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Work returns the work executions in start order.
func (h *History) Work() []WorkRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]WorkRun(nil), h.work...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Faults returns the injected faults.
func (h *History) Faults() []Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Fault(nil), h.faults...)
}

// Answers returns the clients' final answers.
func (h *History) Answers() []Answer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Answer(nil), h.answers...)
}

// Recorder wraps a store for one client and records every call in the
// history. An error other than ErrFenced (a timeout, a dropped connection,
// a crash inside the call) makes the outcome unknown: recorded as such,
// never guessed.
type Recorder struct {
	Store  stores.Store
	Client int
	Hist   *History
	Clock  faults.Clock
}

var _ stores.Store = (*Recorder)(nil)

func (r *Recorder) record(in models.Input, call int64, out models.Output, err error) {
	op := Op{Client: r.Client, Input: in, Output: out, Call: call, Return: r.Hist.Now()}
	if err != nil {
		op.Err = err.Error()
	}
	if out.Unknown {
		op.Return = Never
	}
	r.Hist.addOp(op)
}

// definite reports whether an error is a definite answer (nothing changed).
func definite(err error) bool {
	return err == nil || errors.Is(err, stores.ErrFenced) || errors.Is(err, stores.ErrInvalidKey)
}

// noEffect reports whether a failed call certainly never reached the
// server, so it had no effect and is left out of the history (as an
// invalid key is): the dial failed (server down or restarting), or the
// driver says nothing was sent (pgx's SafeToRetry). Recording such calls as
// unknown would be sound but would bury porcupine in calls that may
// "take effect at any time" during a server outage.
func noEffect(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var safe interface{ SafeToRetry() bool }
	if errors.As(err, &safe) && safe.SafeToRetry() {
		return true
	}
	// Redis refuses commands it has not run with these replies (go-redis
	// marks its reply errors with a RedisError method).
	var reply interface {
		error
		RedisError()
	}
	if errors.As(err, &reply) {
		for _, p := range []string{"LOADING ", "BUSY ", "MASTERDOWN ", "TRYAGAIN "} {
			if strings.HasPrefix(reply.Error(), p) {
				return true
			}
		}
	}
	return false
}

// Begin records the call and its decision.
func (r *Recorder) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	in := models.Input{Kind: models.Begin, Key: req.KeyRef, Fingerprint: req.Fingerprint, Now: req.Now, ID: r.Hist.id()}
	call := r.Hist.Now()
	d, err := r.Store.Begin(ctx, req)
	if errors.Is(err, stores.ErrInvalidKey) || noEffect(err) {
		return d, err // rejected before the store: no effect, nothing to check
	}
	r.record(in, call, models.Output{Decision: d, Unknown: err != nil}, err)
	return d, err
}

// Complete records the call; ErrFenced is a definite answer.
func (r *Recorder) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	in := models.Input{Kind: models.Complete, Key: key, Token: tok, Response: resp, ID: r.Hist.id()}
	call := r.Hist.Now()
	err := r.Store.Complete(ctx, key, tok, resp)
	in.Now = r.Clock.Now() // the store decided no later than this
	if errors.Is(err, stores.ErrInvalidKey) || noEffect(err) {
		return err
	}
	r.record(in, call, models.Output{Fenced: errors.Is(err, stores.ErrFenced), Unknown: !definite(err)}, err)
	return err
}

// Release records the call; ErrFenced is a definite answer.
func (r *Recorder) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	in := models.Input{Kind: models.Release, Key: key, Token: tok, ID: r.Hist.id()}
	call := r.Hist.Now()
	err := r.Store.Release(ctx, key, tok)
	in.Now = r.Clock.Now()
	if errors.Is(err, stores.ErrInvalidKey) || noEffect(err) {
		return err
	}
	r.record(in, call, models.Output{Fenced: errors.Is(err, stores.ErrFenced), Unknown: !definite(err)}, err)
	return err
}

// Prune records the call (its key is empty: it applies to every key).
func (r *Recorder) Prune(ctx context.Context, now time.Time) (int, error) {
	in := models.Input{Kind: models.Prune, Now: now, ID: r.Hist.id()}
	call := r.Hist.Now()
	n, err := r.Store.Prune(ctx, now)
	if noEffect(err) {
		return n, err
	}
	if after := r.Clock.Now(); after.After(in.Now) {
		in.Now = after // a server-clock store pruned by its own clock, no later than this
	}
	r.record(in, call, models.Output{Unknown: err != nil}, err)
	return n, err
}

// Close closes nothing: the runner owns the store.
func (r *Recorder) Close() error { return nil }
