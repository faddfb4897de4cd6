package history

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Recorder wraps a store for one client and records every call in the
// history. An error other than ErrFenced or ErrNotApplied (a timeout, a
// dropped connection, a crash inside the call) makes the outcome unknown:
// recorded as such, never guessed. An error the store declares not
// applied (stores.ErrNotApplied) is a definite no-op, recorded with its
// return time (models.Output.NotApplied). A call that certainly never reached the store (an invalid
// key, a failed dial: see NoEffect) is left out. In a worker process the
// history streams each call to the harness before it is made (see Sink),
// so a call cut short by SIGKILL is still recorded, as unknown.
type Recorder struct {
	Store  stores.Store
	Client int
	Hist   *History
	// Clock is the client's clock: Complete, Release and Prune record the
	// time after the call as the latest the store can have decided at.
	Clock faults.Clock
}

// now reads the client's clock as a wall reading, as every time the
// Recorder gives a store and records is (faults.Wall): the run is then
// judged by the intervals its store measured, and a saved run by the
// same ones.
func (r *Recorder) now() time.Time { return faults.Wall(r.Clock.Now()) }

var _ stores.Store = (*Recorder)(nil)

// Definite reports whether an error from a call is a definite answer
// (nothing changed, or it did): nil, ErrFenced, an invalid key, or an
// error the store declares not applied.
func Definite(err error) bool {
	return err == nil || errors.Is(err, stores.ErrFenced) || errors.Is(err, stores.ErrInvalidKey) || errors.Is(err, stores.ErrNotApplied)
}

// writeOutput is the output of a Complete, Release or Extend that
// returned err: fenced, declared not applied, unknown, or accepted.
func writeOutput(err error) models.Output {
	fenced := errors.Is(err, stores.ErrFenced)
	return models.Output{Fenced: fenced, NotApplied: !fenced && errors.Is(err, stores.ErrNotApplied), Unknown: !Definite(err)}
}

// NoEffect reports whether a failed call certainly never reached the
// server, so it had no effect and is left out of the history (as an
// invalid key is): the dial failed (server down or restarting), or the
// driver says nothing was sent (pgx's SafeToRetry), or Redis refused the
// command before running it. Recording such calls as unknown would be
// sound but would bury porcupine in calls that may "take effect at any
// time" during a server outage.
func NoEffect(err error) bool {
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

// call announces the call and returns its sequence and call time.
func (r *Recorder) call(in models.Input) (int64, int64) {
	t := r.Hist.Now()
	return r.Hist.call(Op{Client: r.Client, Input: in, Call: t, Return: Never}), t
}

// ret records how the call returned; drop leaves it out.
func (r *Recorder) ret(seq int64, in models.Input, call int64, out models.Output, err error, drop bool) {
	op := Op{Client: r.Client, Input: in, Output: out, Call: call, Return: r.Hist.Now()}
	if err != nil {
		op.Err = err.Error()
	}
	if out.Unknown {
		op.ErrAt, op.Return = op.Return, Never
		op.Lost = errors.Is(err, stores.ErrLost)
	}
	// A call declared not applied because the caller's deadline passed
	// (no pool session came free in time) timed out too: slowness, not
	// a refusal the store chose.
	op.Deadline = (out.Unknown || out.NotApplied) && errors.Is(err, ErrPastDeadline)
	r.Hist.ret(seq, op, drop)
}

// Begin records the call and its decision.
func (r *Recorder) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	req.Now = faults.Wall(req.Now)
	in := models.Input{Kind: models.Begin, Key: req.KeyRef, Fingerprint: req.Fingerprint, Now: req.Now, ID: r.Hist.NextID()}
	if r.Clock != nil {
		in.Sent = r.now()
	}
	seq, call := r.call(in)
	d, err := r.Store.Begin(ctx, req)
	drop := errors.Is(err, stores.ErrInvalidKey) || NoEffect(err)
	out := models.Output{Decision: d}
	if err != nil {
		na := errors.Is(err, stores.ErrNotApplied)
		out = models.Output{Unknown: !na, NotApplied: na}
	}
	r.ret(seq, in, call, out, err, drop)
	return d, err
}

// Complete records the call; ErrFenced is a definite answer.
func (r *Recorder) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	in := models.Input{Kind: models.Complete, Key: key, Token: tok, Response: resp, ID: r.Hist.NextID(), Now: r.now()}
	seq, call := r.call(in)
	err := r.Store.Complete(ctx, key, tok, resp)
	in.Now = r.now() // the store decided no later than this
	drop := errors.Is(err, stores.ErrInvalidKey) || NoEffect(err)
	r.ret(seq, in, call, writeOutput(err), err, drop)
	return err
}

// Release records the call; ErrFenced is a definite answer.
func (r *Recorder) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	in := models.Input{Kind: models.Release, Key: key, Token: tok, ID: r.Hist.NextID(), Now: r.now()}
	seq, call := r.call(in)
	err := r.Store.Release(ctx, key, tok)
	in.Now = r.now()
	drop := errors.Is(err, stores.ErrInvalidKey) || NoEffect(err)
	r.ret(seq, in, call, writeOutput(err), err, drop)
	return err
}

// Prune records the call (its key is empty: it applies to every key).
func (r *Recorder) Prune(ctx context.Context, now time.Time) (int, error) {
	now = faults.Wall(now)
	in := models.Input{Kind: models.Prune, Now: now, ID: r.Hist.NextID()}
	seq, call := r.call(in)
	n, err := r.Store.Prune(ctx, now)
	if after := r.now(); after.After(in.Now) {
		in.Now = after // a server-clock store pruned by its own clock, no later than this
	}
	na := errors.Is(err, stores.ErrNotApplied)
	r.ret(seq, in, call, models.Output{Unknown: err != nil && !na, NotApplied: na}, err, NoEffect(err))
	return n, err
}

// Close closes nothing: the runner owns the store.
func (r *Recorder) Close() error { return nil }

// Extend records a lease renewal (stores.Extender); a store that cannot
// extend answers with an error saying so, recorded as nothing (no call
// reached it). ErrFenced is a definite answer.
func (r *Recorder) Extend(ctx context.Context, key stores.KeyRef, tok stores.Token, now time.Time) error {
	ext, ok := r.Store.(stores.Extender)
	if !ok {
		return ErrNoExtend
	}
	in := models.Input{Kind: models.Extend, Key: key, Token: tok, ID: r.Hist.NextID(), Called: r.now(), Now: r.now()}
	seq, call := r.call(in)
	err := ext.Extend(ctx, key, tok, faults.Wall(now))
	in.Now = r.now()
	drop := errors.Is(err, stores.ErrInvalidKey) || NoEffect(err)
	r.ret(seq, in, call, writeOutput(err), err, drop)
	return err
}

// CanExtend reports whether the recorded store renews leases.
func (r *Recorder) CanExtend() bool {
	_, ok := r.Store.(stores.Extender)
	return ok
}

// ErrPastDeadline marks the error of a call that came back once the
// caller's own deadline for it had passed (workload.WithDeadline wraps
// it in): the client gave up waiting. The Recorder records such a call
// as timed out (Op.Deadline). A store's own timeout, reported before the
// caller's deadline, is not marked: it is an error the store answered.
var ErrPastDeadline = errors.New("the call's deadline passed")

// ErrNoExtend: the store does not implement stores.Extender.
var ErrNoExtend = errors.New("the store does not extend leases (stores.Extender)")
