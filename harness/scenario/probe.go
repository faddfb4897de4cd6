package scenario

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/internal/pool"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Probe sends one Begin per key of the history, with the key's first
// fingerprint, as client probeID; a probe that claims releases at once (it
// runs no work). The liveness checker reads the answers. Keys are probed
// probeAtOnce at a time, each key's calls one after another: a key that
// gets no answer waits out its backoffs (about a second) beside the
// others, not before them (a store that refused a few keys of key-space
// spent 7 s in its probe, one key after another).
func (e *Env) Probe(ctx context.Context, probeID int) {
	rec := e.Recorder(probeID, e.Store, e.clock)
	// Part by part: a spilled history is never held whole
	// (history.History.EachPart). The probes' own calls, recorded
	// meanwhile, are not read back.
	_ = e.Hist.EachPart(func(p *history.History) error {
		keyed, order := history.ByKey(p.Ops())
		return pool.Each(len(order), probeAtOnce, func(i int) error {
			e.probeKey(ctx, rec, order[i], keyed[order[i]])
			return nil
		})
	})
}

// probeAtOnce bounds the keys the final probe asks about at once: well
// under a server store's connections (stores/postgres: 16).
const probeAtOnce = 8

// probeKey probes key k, whose calls are ops (see Probe).
func (e *Env) probeKey(ctx context.Context, rec *history.Recorder, k stores.KeyRef, ops []history.Op) {
	fp := ""
	for _, op := range ops {
		if op.Input.Kind == models.Begin {
			fp = op.Input.Fingerprint
			break
		}
	}
	if fp == "" {
		return
	}
	// A call on the key whose answer was lost may still be run by a
	// slow server after the probe's wait, and a Begin run then makes a
	// fresh claim: the probe counts it as its own lost answer.
	lost := slices.ContainsFunc(ops, func(op history.Op) bool { return op.Output.Unknown && op.Input.Kind == models.Begin })
	for errs, waits := 0, 0; ; {
		d, err := rec.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: fp, Now: e.clock.Now()})
		if err == nil && d.Outcome == stores.Claimed {
			_ = rec.Release(ctx, k, d.Token)
		}
		// Done, unless the answer was lost, or the key is in flight
		// after an answer was lost (the claim may be the probe's own,
		// made late by a server that read the request after the
		// probe gave up on it, or a client's whose Begin went
		// unanswered: a Postgres soak at load 30 had a probe answered
		// in flight 70 s after every claim it knew of).
		if err == nil && (d.Outcome != stores.InFlight || !lost) {
			break
		}
		if ctx.Err() != nil {
			break
		}
		// No answer: ask again soon, backing off. A store may fail a
		// call now and then and still be correct (a dropped
		// connection, a timeout): only probeErrTries calls in a row
		// without an answer count as a store that does not answer.
		// If the lost call claimed, the next answer is 409 and the
		// wait below follows.
		if err != nil {
			lost = true
			if errs++; errs == probeErrTries {
				break
			}
			pause := min(probeErrPause<<(errs-1), e.Config.LockTTL)
			if e.pass(ctx, pause, pause) != nil {
				break
			}
			continue
		}
		// In flight after a lost answer: the probe may hold the claim
		// it asked for, so LockTTL is waited out before it asks
		// again. The liveness checker judges a key by its last probe.
		if waits++; waits == probeTries {
			break
		}
		if e.pass(ctx, e.Config.LockTTL+time.Millisecond, e.Config.LockTTL+50*time.Millisecond) != nil {
			break
		}
	}
}

// pass lets time pass: a manual clock jumps by manual, a real one is
// waited for, real (until ctx ends: its error).
func (e *Env) pass(ctx context.Context, manual, real time.Duration) error {
	if m, ok := e.clock.(*faults.ManualClock); ok {
		m.Advance(manual)
		return nil
	}
	return faults.Pause(ctx, real)
}

// probeTries bounds how often the final probe waits out LockTTL on a key
// answered in flight after a lost answer: a key still in flight then is
// stuck. probeErrTries bounds the calls in a row without an answer, after
// pauses of probeErrPause, doubling up to LockTTL: a key whose store never
// answers fails liveness (8 in a row: a store that fails one call in ten at
// random is wrongly judged so once in 10⁸ keys).
const (
	probeTries    = 4
	probeErrTries = 8
	probeErrPause = 25 * time.Millisecond
)

// ProbeAfterLockTTL moves the clock past every claim's LockTTL (a manual
// clock jumps; a real one is waited for) and probes every key (see Probe):
// a key still in flight at its last probe is stuck.
//
// On a real clock the wait is skipped when no claim can still be live
// (mayHoldClaims): every claim was completed or released, and no Begin's
// outcome is unknown. A key in flight then is stuck at once, whatever its
// lease: a store must replay a completed key and let a released one be
// claimed. So a run at a production LockTTL (minutes) waits only where a
// claim was left held, and a scenario whose every claim ended asks at once.
func (e *Env) ProbeAfterLockTTL(ctx context.Context, probeID int) {
	_, manual := e.clock.(*faults.ManualClock)
	if manual || e.mayHoldClaims() {
		if e.pass(ctx, 3*e.Config.LockTTL, e.Config.LockTTL+50*time.Millisecond) != nil {
			return
		}
	}
	e.Probe(ctx, probeID)
}

// mayHoldClaims reports whether some key of the history may still be
// held by a claim: a Begin that claimed with no Complete or Release of
// its token accepted, or a Begin whose outcome is unknown (it may have
// claimed). Part by part, as Probe reads it.
func (e *Env) mayHoldClaims() bool {
	held := false
	_ = e.Hist.EachPart(func(p *history.History) error {
		open := map[stores.Token]bool{}
		for _, op := range p.Ops() {
			switch {
			case op.Input.Kind == models.Begin && op.Output.Unknown:
				held = true
			case op.IsClaim():
				open[op.Output.Decision.Token] = true
			case op.Accepted(models.Complete) || op.Accepted(models.Release):
				delete(open, op.Input.Token)
			}
		}
		if len(open) > 0 {
			held = true
		}
		if held {
			return errHeld
		}
		return nil
	})
	return held
}

// errHeld stops mayHoldClaims's reading at the first held claim.
var errHeld = errors.New("a claim may be held")
