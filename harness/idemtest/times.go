package idemtest

import (
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// modelTimes are the contract parameters the model test runs with, and
// what it leaves out (notes) where a declared LockTTL or retention is
// too long to sleep for.
type modelTimes struct {
	cfg      models.Config
	advances []time.Duration
	notes    []string
}

// ModelSleepBudget is the longest one step of the model test sleeps on a
// server-clock store: a step that would move time by more (past a
// declared LockTTL or retention of seconds or minutes) is not drawn, and
// the model test logs what that leaves out. A caller-clock store's clock
// jumps, and any LockTTL costs nothing.
const ModelSleepBudget = 250 * time.Millisecond

// longLeaseStep is the model test's longest step on a server-clock store
// whose LockTTL is too long to sleep half of: a claim must still be live
// after it (and after several in a row). Its cost is like the steps at the
// suite's own LockTTL (a step sleeps 25 ms on average either way).
const longLeaseStep = 50 * time.Millisecond

// timesFor is the model test's parameters for the factory: the suite's
// own LockTTL and retention, or those the factory declares
// (Factory.LockTTL, Factory.Retention).
func timesFor(f Factory) modelTimes {
	c, sem := f.Clock, f.Semantics
	if c == stores.ServerClock {
		ttl, ret := 30*time.Millisecond, 120*time.Millisecond
		if f.LockTTL > 0 {
			ttl, ret = f.LockTTL, modelRetentionLeases*f.LockTTL
		}
		if f.Retention > 0 {
			ret = f.Retention
		}
		mt := modelTimes{cfg: models.Config{LockTTL: ttl, Retention: ret, Slack: 5 * time.Millisecond, Semantics: sem}}
		stale := mt.cfg.LatestEnd(ttl) + time.Millisecond // a claim past its lease, on any clock the store declares
		for _, a := range []time.Duration{time.Millisecond, ttl / 2, stale, ret} {
			if a <= ModelSleepBudget {
				mt.advances = append(mt.advances, a)
			}
		}
		if ttl/2 > ModelSleepBudget {
			// A lease too long to sleep half of: a step of longLeaseStep
			// instead, so a claim must still be live after one or more
			// of them. Without it every step slept a millisecond, and a
			// store that let a claim go stale after 30 ms of a declared
			// 30 s (a lease in the wrong unit) passed.
			mt.advances = append(mt.advances, longLeaseStep)
		}
		if stale > ModelSleepBudget {
			mt.notes = append(mt.notes, fmt.Sprintf("model: a claim going stale, its takeover and a stale owner fenced not exercised: LockTTL %v%s is past the model test's sleep budget of %v (idemtest.ModelSleepBudget); a claim was held live through sleeps of %v a step, not through its whole lease", ttl, declared(f.LockTTL), ModelSleepBudget, longLeaseStep))
		}
		if ret > ModelSleepBudget {
			mt.notes = append(mt.notes, fmt.Sprintf("model: a prune removing a key past its retention not exercised: retention %v%s is past the model test's sleep budget of %v (idemtest.ModelSleepBudget)", ret, retentionOrigin(f), ModelSleepBudget))
		}
		return mt
	}
	ttl, ret := 10*time.Second, 60*time.Second
	if f.LockTTL > 0 {
		ttl, ret = f.LockTTL, 6*f.LockTTL
	}
	if f.Retention > 0 {
		ret = f.Retention
	}
	return modelTimes{
		cfg:      models.Config{LockTTL: ttl, Retention: ret, Semantics: sem},
		advances: []time.Duration{time.Millisecond, ttl / 2, ttl, ret},
	}
}

// modelRetentionLeases is the model test's retention on a server clock
// where the factory declares a LockTTL and no retention, in LockTTLs.
const modelRetentionLeases = 4

// retentionOrigin says, for notes, where the model test's retention
// came from: declared, or modelRetentionLeases times the declared
// LockTTL (the scenarios keep the suite's own then, and a note naming
// both would read as a contradiction).
func retentionOrigin(f Factory) string {
	if f.Retention == 0 && f.LockTTL > 0 {
		return fmt.Sprintf(" (the model test's: %d times the declared LockTTL; the scenarios keep their own; Factory.Retention sets both)", modelRetentionLeases)
	}
	return declared(f.Retention)
}

// declared is " (declared)" when the factory declared d, for notes.
func declared(d time.Duration) string {
	if d > 0 {
		return " (declared)"
	}
	return ""
}

// leaseNote is what a failure of the model test adds about the store's
// lease when the factory declared none: plainly, a lease a claim
// reported (stores.Decision.LeaseUntil) that is not the model's; else,
// for a Begin answered in flight on a claim whose lease the model had
// seen run out in every state with a claim, that a store keeping a
// longer lease of its own answers so. "" when neither applies.
func (d *driver) leaseNote(in models.Input, out models.Output) string {
	ttl := d.times.cfg.LockTTL
	switch {
	case d.leaseDeclared && (in.Kind != models.Begin || out.Decision.Outcome != stores.InFlight || d.times.cfg.Semantics.ClockStep > 0):
		return ""
	case d.leaseDeclared:
		return fmt.Sprintf("\n  the claim may have been held past the LockTTL %v the store declared (idemtest.Factory.LockTTL)%s", ttl, clockStepHint(d.times.cfg.Semantics))
	case d.saidLease > 0:
		return fmt.Sprintf("\n  the store reports a lease of %v on its claims (Decision.LeaseUntil), not the LockTTL %v the suite gave it in stores.Config: it keeps a lease of its own; declare it, idemtest.Factory{LockTTL: %v}, and the suite judges it at that lease", d.saidLease, ttl, d.saidLease)
	case in.Kind != models.Begin || out.Decision.Outcome != stores.InFlight:
		return ""
	}
	held := false
	for _, s := range d.states(in.Key) {
		if !s.Exists || s.Done || s.Tombstone {
			// No claim: the model forbids the 409 from this state
			// whatever the lease, so it says nothing of it (a state
			// the model keeps beside a claim, "no row", hid the note).
			continue
		}
		lease := ttl
		if s.Lease > 0 {
			lease = s.Lease
		}
		if s.LockUncertain || in.Now.Sub(s.LockedAt) < d.times.cfg.LatestEnd(lease) {
			return ""
		}
		held = true
	}
	if !held {
		return ""
	}
	return fmt.Sprintf("\n  the claim was held past the LockTTL %v the suite gave the store in stores.Config: if the store keeps a longer lease of its own, whatever stores.Config.LockTTL says, declare it (idemtest.Factory.LockTTL) and the suite judges it at that lease; if it does not, it kept a claim past its lease", ttl)
}
