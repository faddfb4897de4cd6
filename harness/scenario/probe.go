package scenario

import (
	"context"
	"errors"
	"slices"
	"strings"
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
	skip := map[stores.KeyRef]bool{}
	for _, k := range e.Unprobed() {
		skip[k] = true
	}
	_ = e.Hist.EachPart(func(p *history.History) error {
		keyed, order := history.ByKey(p.Ops())
		order = slices.DeleteFunc(order, func(k stores.KeyRef) bool { return skip[k] })
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
	lostLast := false // the probe's previous call lost its answer
	for calls, errs, waits, refused := 1, 0, 0, 0; ; calls++ {
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
		// Refused as not applied (a serialization failure, no session
		// free): the store changed nothing, so no answer was lost, and
		// asking again costs the key nothing: it is asked again more
		// often than after an error, with short pauses. Eight in a row,
		// as errors, left one key in 256 unjudged on a correct store
		// refusing one call in two.
		if errors.Is(err, stores.ErrNotApplied) {
			if refused++; refused == probeRefusedTries {
				break
			}
			pause := min(probeErrPause<<min(refused-1, 2), e.Config.LockTTL)
			if e.pass(ctx, pause, pause) != nil {
				break
			}
			continue
		}
		refused = 0
		// No answer: ask again soon, backing off. A store may fail a
		// call now and then and still be correct (a dropped
		// connection, a timeout): only probeErrTries calls in a row
		// without an answer count as a store that does not answer.
		// If the lost call claimed, the next answer is 409 and the
		// wait below follows.
		if err != nil {
			lost, lostLast = true, true
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
		// Where the run may not wait that long, the key is left out.
		if e.probeLimited() {
			e.leaveOut(k)
			break
		}
		// A 409 right after the probe's own lost answer is that claim's
		// (the takeover the probe asked for, whose answer was lost):
		// it does not count against the key, only a 409 after an
		// answered call does; probeCalls bounds the rest.
		errs = 0 // an answer: the errors counted are those in a row
		if !lostLast {
			waits++
		}
		lostLast = false
		if waits == probeTries || calls >= probeCalls {
			break
		}
		if e.pass(ctx, e.leaseEnd()+time.Millisecond, e.leaseEnd()+50*time.Millisecond) != nil {
			break
		}
	}
}

// leaseEnd is how long after its lock a claim of LockTTL may still hold
// its key: the LockTTL, and for a store whose clock counts in steps
// (stores.Semantics.ClockStep) the LockTTL rounded up to a step and a
// step more ([models.Config.LatestEnd]). A probe sooner than that may
// meet a claim the store still holds rightly: a whole-second store's
// claim, held up to 2 s at a LockTTL of 250 ms, failed liveness in a
// third of its sched-crash runs, the probe three LockTTLs on.
func (e *Env) leaseEnd() time.Duration {
	return models.Config{LockTTL: e.Config.LockTTL, Semantics: e.setup.Semantics}.LatestEnd(e.Config.LockTTL)
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
// pauses of probeErrPause, doubling up to LockTTL: a key the store does
// not answer while it answers most others fails liveness (8 in a row: a store
// that fails one call in ten at random is wrongly judged so once in 10⁸
// keys), and one it does not answer while it answers few others or none
// is not judged (the liveness checker).
const (
	probeTries    = 4
	probeErrTries = 8
	probeErrPause = 25 * time.Millisecond
	// probeRefusedTries bounds the calls in a row refused as not
	// applied (stores.ErrNotApplied), after pauses of probeErrPause
	// doubling to four times it: a key left so is not judged (the
	// liveness checker), and 32 in a row at one refusal in two is one
	// key in four billion.
	probeRefusedTries = 32
	// probeCalls bounds all the final probe's calls on one key: behind a
	// link that loses answers, each LockTTL waited out may end in a
	// takeover whose answer is lost in turn (scripts/lossy-exec.py).
	probeCalls = 64
)

// ProbeAfterLockTTL moves the clock past every claim's LockTTL, its
// clock step included (a manual clock jumps; a real one is waited for),
// and probes every key (see Probe): a key still in flight at its last
// probe is stuck.
//
// On a real clock the wait is skipped when no claim can still be live
// (heldKeys): every claim was completed or released, and no Begin's
// outcome is unknown. A key in flight then is stuck at once, whatever its
// lease: a store must replay a completed key and let a released one be
// claimed. So a run at a production LockTTL (minutes) waits only where a
// claim was left held, and a scenario whose every claim ended asks at once.
//
// Where the run may not wait LockTTL out (Setup.ProbeWait), it never
// waits: the keys a claim may still hold are left out (PlanProbe) and
// the rest asked at once.
func (e *Env) ProbeAfterLockTTL(ctx context.Context, probeID int) {
	_, manual := e.clock.(*faults.ManualClock)
	switch {
	case e.probeLimited():
		e.PlanProbe()
	case manual || len(e.heldKeys(true)) > 0:
		if e.pass(ctx, e.leaseEnd()+2*e.Config.LockTTL, e.leaseEnd()+50*time.Millisecond) != nil {
			return
		}
	}
	e.Probe(ctx, probeID)
}

// probeWaitSlack is how much longer than LockTTL the final probe waits
// on a real clock.
const probeWaitSlack = 50 * time.Millisecond

// probeLimited reports whether the final probe may not wait LockTTL out:
// a real clock, and a LockTTL past Setup.ProbeWait.
func (e *Env) probeLimited() bool {
	if _, manual := e.clock.(*faults.ManualClock); manual {
		return false
	}
	return e.setup.ProbeWait > 0 && e.leaseEnd()+probeWaitSlack > e.setup.ProbeWait
}

// PlanProbe, where the final probe may not wait LockTTL out
// (Setup.ProbeWait), leaves out of it every key a claim may still hold
// (heldKeys), and notes how many: asked at once, such a key answers 409
// until its lease ends, which is no sign of a stuck key. Their liveness
// is not judged (check.Params.Unprobed); every other key is. It runs
// once; ProbeAfterLockTTL calls it if the caller did not, and a caller
// that saves what the run is judged by calls it first (Unprobed).
func (e *Env) PlanProbe() {
	if !e.probeLimited() {
		return
	}
	r := e.root()
	r.mu.Lock()
	done := r.planned
	r.planned = true
	r.mu.Unlock()
	if done {
		return
	}
	held := e.heldKeys(false)
	if len(held) == 0 {
		return
	}
	for k := range held {
		e.leaveOut(k)
	}
	left := e.Unprobed()
	e.Note("final probe: %d key(s) left out (first %s): a claim on them may still be held (a Begin whose outcome is unknown, or a claim with no save or release accepted), and waiting out the LockTTL of %v is past the %v this run may wait; their liveness is not judged",
		len(left), left[0], e.Config.LockTTL, e.setup.ProbeWait)
}

// leaveOut adds k to the keys the final probe leaves out.
func (e *Env) leaveOut(k stores.KeyRef) {
	r := e.root()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.unprobed, k) {
		r.unprobed = append(r.unprobed, k)
	}
}

// Unprobed lists the keys the final probe left out (PlanProbe, and keys
// whose probe's own answer was lost where it may not wait), in a stable
// order.
func (e *Env) Unprobed() []stores.KeyRef {
	r := e.root()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.unprobed)
	slices.SortFunc(out, func(a, b stores.KeyRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// heldKeys lists the keys of the history a claim may still hold: a
// Begin that claimed with no Complete or Release of its token accepted,
// or a Begin whose outcome is unknown (it may have claimed). Part by
// part, as Probe reads it (a key's calls are all in one part); first
// stops at the first such key.
func (e *Env) heldKeys(first bool) map[stores.KeyRef]bool {
	held := map[stores.KeyRef]bool{}
	_ = e.Hist.EachPart(func(p *history.History) error {
		open := map[stores.Token]stores.KeyRef{}
		for _, op := range p.Ops() {
			switch {
			case op.Input.Kind == models.Begin && op.Output.Unknown:
				held[op.Input.Key] = true
			case op.IsClaim():
				open[op.Output.Decision.Token] = op.Input.Key
			case op.Accepted(models.Complete) || op.Accepted(models.Release):
				delete(open, op.Input.Token)
			}
		}
		for _, k := range open {
			held[k] = true
		}
		if first && len(held) > 0 {
			return errHeld
		}
		return nil
	})
	return held
}

// errHeld stops heldKeys's reading at the first held key.
var errHeld = errors.New("a claim may be held")
