// Package faults injects failures: named failpoints that stores and the Run
// flow pass through (a no-op unless a test arms them), with pause, crash and
// yield actions, and an injectable clock with per-client skew.
package faults

import (
	"context"
	"errors"
	"time"
)

// Failpoint names used by the Run flow. Stores define their own beside the
// statements they separate (for example "begin.after-select").
const (
	RunAfterClaim     = "run.after-claim"     // claimed, work not started
	RunAfterWork      = "run.after-work"      // work done, response not saved
	RunBeforeRelease  = "run.before-release"  // work failed, claim not released
	RunAfterComplete  = "run.after-complete"  // response saved
	BeginAfterSelect  = "begin.after-select"  // between a read and the write that depends on it
	BeginBeforeCommit = "begin.before-commit" // inside Begin's transaction, before it commits
	// BeforeRoundTrip is passed before every round trip a store makes to
	// its server (every statement, command or script, and every write
	// transaction of SQLite): the stores hit it from their drivers' hooks,
	// not beside the statements, so a store whose operation takes two round
	// trips is interleaved there by the scheduler even where nobody put a
	// failpoint between them.
	BeforeRoundTrip = "store.round-trip"
	// WaitTurn is where a store is about to wait for a lock another client
	// of the same process holds (SQLite's writer turn). See Wait.
	WaitTurn = "store.wait-turn"
)

// ErrCrashed is returned by Hit when the armed action is a crash: the caller
// must stop where it is and clean nothing up, as a killed process would.
var ErrCrashed = errors.New("crashed at failpoint")

// Handler decides what happens when a client reaches a failpoint. It may
// block (a pause, or a scheduler holding the client) and returns ErrCrashed
// (or any error) to make the client stop there.
type Handler interface {
	Hit(ctx context.Context, name string) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, name string) error

// Hit calls f.
func (f HandlerFunc) Hit(ctx context.Context, name string) error { return f(ctx, name) }

type handlerKey struct{}

// WithHandler returns a context whose failpoints are decided by h. Each
// client of a harness gets its own, so failpoints are per client and tests
// can run in parallel.
func WithHandler(ctx context.Context, h Handler) context.Context {
	return context.WithValue(ctx, handlerKey{}, h)
}

// Hit passes through the named failpoint: nothing happens unless the context
// carries a Handler. Stores call it between the steps of an operation.
func Hit(ctx context.Context, name string) error {
	h, ok := ctx.Value(handlerKey{}).(Handler)
	if !ok || h == nil {
		return nil
	}
	return h.Hit(ctx, name)
}

// Waiter is a Handler that can hold a client that would otherwise block on
// a lock (harness/sched): it parks the client at the named failpoint and
// lets it go, to try the lock again, when its turn comes. The scheduler
// then sees blocking as an event, not as a client that went quiet for a
// while, so the same seed makes the same choices however loaded the
// machine is.
type Waiter interface {
	Handler
	// Waits reports whether the handler holds waiting clients now (a
	// scheduler that has let every client run freely does not).
	Waits() bool
}

// Wait is called by a store that found a lock taken and is about to block
// on it: under a Waiter it parks at name and returns true, and the store
// tries the lock again; otherwise it returns false at once and the store
// blocks as usual.
func Wait(ctx context.Context, name string) (bool, error) {
	w, ok := ctx.Value(handlerKey{}).(Waiter)
	if !ok || w == nil || !w.Waits() {
		return false, nil
	}
	return true, w.Hit(ctx, name)
}

// Pause blocks for d or until ctx ends, like a GC pause or a stalled disk.
func Pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PauseUntil pauses for d, then on until until reports true (asked every
// every), for at most longest in all, or until ctx ends (its error). A
// wait that must outlast an event (another client's takeover, traffic
// through a fault) waits for it, where a fixed pause could end first on a
// loaded machine.
func PauseUntil(ctx context.Context, d, longest, every time.Duration, until func() bool) error {
	begun := time.Now()
	err := Pause(ctx, d)
	for err == nil && !until() && time.Since(begun) < longest {
		err = Pause(ctx, min(every, longest-time.Since(begun)))
	}
	return err
}
