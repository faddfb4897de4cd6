// Package workload is the traffic of a run: orders (one logical operation
// each, with its idempotency key and the fingerprint of its parameters),
// clients that submit them with retries (exponential backoff with full
// jitter, the same key on 409 and unknown outcomes, never a retry after
// 422), the failpoint plans that pause or crash a client, and the
// client-side mutants: clients that make the classic mistakes on a
// correct store. It records into a history and charges a ledger; it never
// judges what it recorded.
package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/stores"
)

// Order is one logical operation a client wants done exactly once.
type Order struct {
	ID          string
	Key         stores.KeyRef // the idempotency key: one per order
	Fingerprint string        // a fingerprint of the order's parameters
	Amount      int
	// Tail is what the work's answer carries after its text: text a
	// careless store loses (quotes, a backslash, a character outside the
	// Basic Multilingual Plane, "\r\n", trailing blanks, or enough to pass
	// 255 characters), replayed byte for byte by a correct one. Always
	// valid UTF-8: an API's answers are text (JSON, in the lesson card), and
	// a store may keep them in a text column. Empty: a plain answer.
	Tail string
}

// Tails are the answers' tails an order may carry (see Order.Tail): one of
// characters that escaping, encoding or trimming loses, one long (301
// characters in 401 bytes: past 255 either way).
var Tails = [...]string{
	" \"q\" \\ \U0001F4B3\r\n\t ",
	" " + strings.Repeat("é", 100) + strings.Repeat("-", 199) + " ",
}

// KeyPolicy is how a client picks the idempotency key for each attempt.
type KeyPolicy string

const (
	// SameKey sends the order's key on every retry: the rule.
	SameKey KeyPolicy = "same-key"
	// KeyPerTry makes a new key per attempt: each retry is a new operation.
	KeyPerTry KeyPolicy = "key-per-try"
	// NoKey skips the store altogether.
	NoKey KeyPolicy = "no-key"
)

// Client submits orders with retries: exponential backoff with full jitter,
// the same key on 409 and unknown outcomes, never a retry after 422.
type Client struct {
	ID     int
	Store  stores.Store // a Recorder around the scenario's store
	Clock  faults.Clock
	Hist   *history.History
	Ledger *history.Ledger
	// Faults decides the client's failpoints (pause, crash): its Plan's
	// handler, or in a worker process the handler that stops there and
	// asks the harness. Nil: none.
	Faults faults.Handler
	Policy stores.ErrorPolicy
	Keys   KeyPolicy
	// DownstreamKeyed passes charge:<orderId> to the provider; false is
	// the "key only at the top hop" bug.
	DownstreamKeyed bool
	MaxAttempts     int
	Backoff         time.Duration // first backoff; doubles per attempt
	MaxBackoff      time.Duration
	WorkTime        time.Duration
	// FailWork, if set, says whether the work fails on this attempt.
	FailWork func(order Order, attempt int) bool
	Rand     *rand.Rand
	// Charge, if set, charges the provider instead of Ledger: a worker
	// process asks the harness, which holds the one ledger.
	Charge func(order, key string, client int, at int64) string
	// GiveUp, if set, is asked after each failed attempt; true stops
	// retrying the order (a client whose request timed out a few times
	// reconciles later instead of hammering an unreachable server).
	GiveUp func(err error) bool
	// Yield, if set, hears every failpoint of the client's attempts after
	// its Faults let it pass: the controlled scheduler
	// (harness/sched) parks the client there until it may run.
	Yield faults.Handler
	// DownstreamByKey passes charge:<the attempt's idempotency key> to the
	// provider instead of charge:<orderId>: the same while the key is one
	// per order, a new charge per attempt under KeyPerTry.
	DownstreamByKey bool
	// FailAfterCharge makes the work's failures (FailWork) happen after
	// the provider charged, as when its reply is lost, not before.
	FailAfterCharge bool
	// FirstWorkTime, if set, is how long the first attempt's work takes
	// (a slow provider call); later attempts take WorkTime.
	FirstWorkTime time.Duration
	// Heartbeat, if set and the store renews leases (stores.Extender),
	// extends the claim every Heartbeat while the work runs: slow work
	// keeps its key. A heartbeat that is fenced means the claim is lost;
	// the work runs on (its save will be fenced).
	Heartbeat time.Duration
}

// chain passes a failpoint to each handler in turn (nil ones skipped),
// stopping at an error.
type chain []faults.Handler

// Waits makes the chain a faults.Waiter when one of its handlers is one
// that holds waiting clients now (a scheduler's).
func (c chain) Waits() bool {
	for _, h := range c {
		if w, ok := h.(faults.Waiter); ok && w.Waits() {
			return true
		}
	}
	return false
}

func (c chain) Hit(ctx context.Context, name string) error {
	for _, h := range c {
		if h == nil {
			continue
		}
		if err := h.Hit(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// ErrGaveUp ends an operation whose attempts all failed retryably.
var ErrGaveUp = errors.New("gave up after max attempts")

// Submit runs the order to an answer and records the answer.
func (c *Client) Submit(ctx context.Context, o Order) history.Answer {
	a := c.submit(ctx, o)
	a.At = c.Hist.Now()
	c.Hist.AddAnswer(a)
	return a
}

func (c *Client) submit(ctx context.Context, o Order) history.Answer {
	ans := history.Answer{Client: c.ID, Key: o.Key, Order: o.ID, Fingerprint: o.Fingerprint}
	var lastErr error
	for attempt := 1; attempt <= c.MaxAttempts; attempt++ {
		ans.Attempts = attempt
		key := o.Key
		if c.Keys == KeyPerTry {
			key.Key = fmt.Sprintf("%s#try%d", o.Key.Key, attempt)
		}
		actx := faults.WithHandler(WithKey(ctx, key), chain{c.Faults, c.Yield})
		work := c.work(o, key, attempt)
		var res stores.Result
		err := faults.Hit(actx, faults.RunBeforeBegin)
		if err != nil {
			// stopped before sending (crashed, or the run ended)
		} else if c.Keys == NoKey {
			var resp stores.Response
			resp, err = work(actx, "")
			res.Response = resp
		} else {
			req := stores.Request{KeyRef: key, Fingerprint: o.Fingerprint, Now: c.Clock.Now()}
			res, err = stores.Run(actx, c.Store, req, c.Policy, work)
		}
		if err == nil {
			ans.Response, ans.Status, ans.Replayed = res.Response, res.Response.Status, res.Replayed
			return ans
		}
		lastErr = err
		switch {
		case errors.Is(err, faults.ErrCrashed):
			ans.Err = "crashed"
			return ans
		case errors.Is(err, stores.ErrMismatch), errors.Is(err, stores.ErrInvalidKey):
			ans.Status, ans.Err = stores.HTTPStatus(err), err.Error()
			return ans
		case ctx.Err() != nil:
			ans.Err = ctx.Err().Error()
			return ans
		case c.GiveUp != nil && c.GiveUp(err):
			ans.Status, ans.Err = stores.HTTPStatus(err), fmt.Sprintf("%v: %v", ErrGaveUp, err)
			return ans
		}
		if err := faults.Pause(ctx, c.backoff(attempt)); err != nil {
			ans.Err = err.Error()
			return ans
		}
	}
	ans.Status, ans.Err = stores.HTTPStatus(lastErr), fmt.Sprintf("%v: %v", ErrGaveUp, lastErr)
	return ans
}

// backoff is exponential with full jitter.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.Backoff << (attempt - 1)
	if d > c.MaxBackoff || d <= 0 {
		d = c.MaxBackoff
	}
	return d/2 + time.Duration(c.Rand.Int63n(int64(d/2)+1))
}

// work is the operation the key guards: a charge at the provider.
func (c *Client) work(o Order, key stores.KeyRef, attempt int) stores.Work {
	return func(ctx context.Context, tok stores.Token) (stores.Response, error) {
		d := c.WorkTime
		if attempt == 1 && c.FirstWorkTime > 0 {
			d = c.FirstWorkTime
		}
		var beat time.Duration
		if _, ok := c.Store.(extender); ok && c.Heartbeat > 0 && tok != "" {
			beat = c.Heartbeat // as runWork sleeps
		}
		i := c.Hist.AddWork(history.WorkRun{Client: c.ID, Key: key, Order: o.ID, Token: tok, Start: c.Hist.Now(), End: history.Never, Planned: d, Beat: beat})
		if err := c.runWork(ctx, key, tok, d); err != nil {
			c.Hist.EndWork(i, true, "")
			return stores.Response{}, err
		}
		fail := c.FailWork != nil && c.FailWork(o, attempt)
		if fail && !c.FailAfterCharge {
			c.Hist.EndWork(i, true, "")
			faults.Trace(ctx, "POST /charges (provider)", "error: payment provider unavailable, nothing charged")
			return stores.Response{}, errors.New("payment provider unavailable")
		}
		downstream := ""
		if c.DownstreamKeyed {
			downstream = "charge:" + o.ID
			if c.DownstreamByKey {
				downstream = "charge:" + key.Key
			}
		}
		var id string
		if c.Charge != nil {
			id = c.Charge(o.ID, downstream, c.ID, c.Hist.Now())
		} else {
			id = c.Ledger.Charge(o.ID, downstream, c.ID, c.Hist.Now())
		}
		if faults.Tracing(ctx) {
			sent := "no idempotency key"
			if downstream != "" {
				sent = "idempotency key " + downstream
			}
			faults.Tracef(ctx, "POST /charges (provider)", "%s for order %s (%s)", id, o.ID, sent)
		}
		if fail { // charged, but the reply was lost
			c.Hist.EndWork(i, true, id)
			return stores.Response{}, errors.New("payment provider: reply lost (charged " + id + ")")
		}
		c.Hist.EndWork(i, false, id)
		// The body names the owner, as an API's log line would.
		return stores.Response{Status: 201, Body: fmt.Sprintf("charged %s %d cents (owner %s)", id, o.Amount, faults.ShortToken(string(tok))) + o.Tail}, nil
	}
}

// extender is a store that renews leases (stores.Extender).
type extender interface {
	Extend(ctx context.Context, key stores.KeyRef, token stores.Token, now time.Time) error
}

// runWork takes d, extending the claim every Heartbeat if the client beats
// and the store renews leases.
func (c *Client) runWork(ctx context.Context, key stores.KeyRef, tok stores.Token, d time.Duration) error {
	ext, ok := c.Store.(extender)
	if c.Heartbeat <= 0 || !ok || tok == "" {
		return faults.Pause(ctx, d)
	}
	for d > 0 {
		step := min(c.Heartbeat, d)
		if err := faults.Pause(ctx, step); err != nil {
			return err
		}
		if d -= step; d > 0 {
			_ = ext.Extend(ctx, key, tok, c.Clock.Now())
		}
	}
	return nil
}
