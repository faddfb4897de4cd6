package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/stores"
)

// WithDeadline bounds each store call with a timeout, as a real client
// does: a call to a frozen server returns an error (an unknown outcome)
// instead of hanging until the server comes back. d <= 0: no bound.
func WithDeadline(s stores.Store, d time.Duration) stores.Store {
	if d <= 0 {
		return s
	}
	return deadlineStore{s, d}
}

type deadlineStore struct {
	stores.Store
	d time.Duration
}

func (s deadlineStore) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, s.d)
	defer cancel()
	d, err := s.Store.Begin(ctx, req)
	return d, pastDeadline(ctx, err)
}

func (s deadlineStore) Complete(ctx context.Context, k stores.KeyRef, t stores.Token, r stores.Response) error {
	ctx, cancel := context.WithTimeout(ctx, s.d)
	defer cancel()
	return pastDeadline(ctx, s.Store.Complete(ctx, k, t, r))
}

func (s deadlineStore) Release(ctx context.Context, k stores.KeyRef, t stores.Token) error {
	ctx, cancel := context.WithTimeout(ctx, s.d)
	defer cancel()
	return pastDeadline(ctx, s.Store.Release(ctx, k, t))
}

func (s deadlineStore) Prune(ctx context.Context, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.d)
	defer cancel()
	n, err := s.Store.Prune(ctx, now)
	return n, pastDeadline(ctx, err)
}

// pastDeadline marks err, the error of a call that came back once the
// call's own deadline (ctx's) had passed, as [history.ErrPastDeadline]:
// the client gave up waiting, whatever error the driver reported then (a
// network read timeout, a statement the server cancelled, the context's
// own), and the history records the call as timed out
// (history.Op.Deadline), not as an error the store answered.
func pastDeadline(ctx context.Context, err error) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, history.ErrPastDeadline) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, history.ErrPastDeadline)
}

// Close closes nothing: the owner of the wrapped store closes it.
func (s deadlineStore) Close() error { return nil }

// UnknownBudget returns a Client.GiveUp that stops retrying an order after
// n attempts ended without a known outcome (a timeout, a dropped
// connection): a real client reconciles such an order later rather than
// hammering an unreachable server, and each unknown outcome multiplies the
// orders porcupine must consider on its key. 409s do not count, nor calls
// that never reached the server, nor those the store declared not applied
// (a definite answer: nothing happened).
func UnknownBudget(n int) func(error) bool {
	count := 0
	return func(err error) bool {
		if errors.Is(err, stores.ErrInFlight) || errors.Is(err, stores.ErrFenced) || errors.Is(err, stores.ErrNotApplied) || history.NoEffect(err) {
			return false
		}
		count++
		return count >= n
	}
}
