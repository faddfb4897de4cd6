package scenario

import (
	"context"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
)

// signal is an event one client reaches and others wait for: an ordering
// of a scenario's clients, not a fault (nothing is recorded). A fixed
// sleep orders them only while the store answers fast: on a loaded
// machine a Postgres store's first Begin, on a connection the pool was
// still making, took 0.4–1.8 s, the clients meant to come second claimed
// first, and the takeover scenario let an unfenced save go unseen.
type signal struct {
	once sync.Once
	ch   chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

// fire marks the event as reached; later calls do nothing.
func (s *signal) fire() { s.once.Do(func() { close(s.ch) }) }

// fired reports whether the event was reached.
func (s *signal) fired() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// wait returns once the event is reached (true), or longest has passed
// or ctx ended (false): a client that never gets there (a store that
// never answers) holds the others up for longest at most.
func (s *signal) wait(ctx context.Context, longest time.Duration) bool {
	t := time.NewTimer(longest)
	defer t.Stop()
	select {
	case <-s.ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// firstAnswer returns next with s fired once the client's first Begin has
// been answered: at its first claim (faults.RunAfterClaim), before next
// sees the failpoint (a pause there comes after the signal), or at its
// second Begin (the first was answered otherwise). A client whose Submit
// returns without either (a replay) is the caller's to fire. The handler
// belongs to one client.
func firstAnswer(s *signal, next faults.Handler) faults.Handler {
	begins := 0
	return faults.HandlerFunc(func(ctx context.Context, name string) error {
		switch name {
		case faults.RunBeforeBegin:
			if begins++; begins > 1 {
				s.fire()
			}
		case faults.RunAfterClaim:
			s.fire()
		}
		if next == nil {
			return nil
		}
		return next.Hit(ctx, name)
	})
}

// onClaim returns next with s fired whenever the client's Begin is
// answered with a claim (faults.RunAfterClaim), before next sees the
// failpoint. Given to the clients that come after an owner, it tells that
// one of them claimed the key: a takeover of the owner's claim, or a
// fresh claim once the owner's record was pruned (a retention shorter
// than the LockTTL prunes a claim still held: the store may), which the
// history's takeovers (history.History.TakenOver) do not show.
func onClaim(s *signal, next faults.Handler) faults.Handler {
	return faults.HandlerFunc(func(ctx context.Context, name string) error {
		if name == faults.RunAfterClaim {
			s.fire()
		}
		if next == nil {
			return nil
		}
		return next.Hit(ctx, name)
	})
}
