package stores

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemcheck/idemcheck/faults"
)

// ErrorPolicy says what Run does when the work fails: the card's design note.
type ErrorPolicy int

const (
	// ReleaseOnError deletes the claim (fenced) so a retry runs the work
	// again. Safe only when the work is idempotent downstream.
	ReleaseOnError ErrorPolicy = iota
	// SaveError saves the error as the response (status 500) and replays
	// it to every retry, as Stripe's API v1 does.
	SaveError
)

// String names the policy as flags and reports spell it.
func (p ErrorPolicy) String() string {
	if p == SaveError {
		return "save-error"
	}
	return "release"
}

// Errors Run returns besides the work's own.
var (
	// ErrInFlight: another owner holds a live claim (HTTP 409); retry later
	// with the same key.
	ErrInFlight = errors.New("409 conflict: key in flight")
	// ErrMismatch: the key was used with other parameters (HTTP 422); a
	// client bug, never retried.
	ErrMismatch = errors.New("422 mismatch: key reused with different parameters")
)

// Work is the operation guarded by the key. It receives the claim's token so
// it can pass it (or the key) downstream.
type Work func(ctx context.Context, token Token) (Response, error)

// Result is what Run answers when it has a response: from the work it just
// ran (Replayed false) or replayed from the store.
type Result struct {
	Response   Response
	Replayed   bool
	Takeover   bool
	Token      Token
	WorkFailed bool // the work failed and, under SaveError, its error was saved
}

// Run is the card's run(): Begin, then the work, then Complete, with the
// error policy chosen by the caller. Failpoints between the steps let a
// harness pause or crash the caller; a crash returns at once and cleans
// nothing up, as a killed process would.
func Run(ctx context.Context, s Store, req Request, policy ErrorPolicy, work Work) (Result, error) {
	if err := ValidateKey(req.KeyRef); err != nil {
		return Result{}, err
	}
	d, err := s.Begin(ctx, req)
	if err != nil {
		return Result{}, fmt.Errorf("begin: %w", err)
	}
	switch d.Outcome {
	case Replay:
		return Result{Response: d.Response, Replayed: true}, nil
	case InFlight:
		return Result{}, ErrInFlight
	case Mismatch:
		return Result{}, ErrMismatch
	case Claimed:
	default:
		return Result{}, fmt.Errorf("begin: unknown outcome %v", d.Outcome)
	}
	res := Result{Token: d.Token, Takeover: d.Takeover}
	if err := faults.Hit(ctx, faults.RunAfterClaim); err != nil {
		return res, err
	}
	resp, werr := work(ctx, d.Token)
	if werr != nil {
		if policy == ReleaseOnError {
			if err := faults.Hit(ctx, faults.RunBeforeRelease); err != nil {
				return res, err
			}
			if err := s.Release(ctx, req.KeyRef, d.Token); err != nil && !errors.Is(err, ErrFenced) {
				return res, fmt.Errorf("work failed: %w; release: %v", werr, err)
			}
			return res, fmt.Errorf("work failed: %w", werr)
		}
		resp = Response{Status: 500, Body: "error: " + werr.Error()}
		res.WorkFailed = true
	}
	if err := faults.Hit(ctx, faults.RunAfterWork); err != nil {
		return res, err
	}
	if err := s.Complete(ctx, req.KeyRef, d.Token, resp); err != nil {
		return res, fmt.Errorf("complete: %w", err)
	}
	res.Response = resp
	if err := faults.Hit(ctx, faults.RunAfterComplete); err != nil {
		return res, err
	}
	return res, nil
}

// HTTPStatus maps an error from Run to the status an API would answer:
// 400 invalid key, 409 in flight or fenced, 422 mismatch, 500 otherwise.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return 200
	case errors.Is(err, ErrInvalidKey):
		return 400
	case errors.Is(err, ErrInFlight), errors.Is(err, ErrFenced):
		return 409
	case errors.Is(err, ErrMismatch):
		return 422
	}
	return 500
}
