package stores

import (
	"context"
	"time"
)

// Semantics declares what a store does where the contract leaves it a
// choice, so that a harness judges the store by what it promises rather
// than by one reading of the contract (as testing/fstest and nettest let
// an implementation say what it supports). Each field is a documented
// option of the model (package models); the zero value is the contract as
// docs/DESIGN.md §1 states it.
type Semantics struct {
	// LeaseBoundWrites: a claim's ownership ends with its lease. Complete
	// and Release (and Extend) after the lease has run out may be fenced
	// even when nobody took the key over. Stricter than the contract, and
	// safe: the owner learns it lost the key instead of saving late. The
	// risk the store takes on: work that outlasts its lease has its answer
	// refused, so the client must retry (with the same key).
	LeaseBoundWrites bool `json:"lease_bound_writes,omitempty"`
	// ReleaseKeepsFingerprint: Release leaves a record with the key's
	// fingerprint (an "abandoned" claim, a tombstone) instead of deleting
	// it, until the retention ends. A later Begin with the same parameters
	// claims the key again; one with other parameters gets Mismatch (422),
	// where the contract would let it claim. The risk: a client that
	// released after a failure cannot reuse the key with corrected
	// parameters; it needs a new key.
	ReleaseKeepsFingerprint bool `json:"release_keeps_fingerprint,omitempty"`
	// PerRequestLease: the store honours Request.Lease, a lease chosen by
	// each request, instead of LockTTL for that claim.
	PerRequestLease bool `json:"per_request_lease,omitempty"`
	// QuietRelease: a Release that is not the owner's (fenced: the key is
	// done, taken over, gone, or the token is not its own) may answer ok
	// instead of ErrFenced, as long as it leaves the key alone. The lesson
	// card's release on error is "0 rows changed: the claim isn't mine any
	// more: leave it", and Run treats ErrFenced from Release as success
	// anyway, so a store may not report it. Only Release: a save must say
	// it was fenced, or its caller answers with a response nobody saved.
	// The risk: a caller cannot tell whether its release did anything.
	QuietRelease bool `json:"quiet_release,omitempty"`
	// FenceRestartsPerLife: the store's fencing numbers (Fence, or
	// Decision.Fence) strictly increase within each life of a key's
	// record, not across them. A life runs from the claim that creates the
	// record until retention removes it (a Prune, or the store's own
	// expiry); a Release does not end it. After the record may have been
	// removed, the next claim may carry a lower number (a counter kept in
	// the record starts again at 1). The risk: a system downstream that
	// fences by the number alone must forget the key's last number when
	// the key's retention ends, or it refuses the new life's writes.
	FenceRestartsPerLife bool `json:"fence_restarts_per_life,omitempty"`
	// ClockStep: the store counts time in steps this long (a clock in
	// whole seconds: time.Second), rounding its leases up: a claim may
	// stay in flight until its lease rounded up to a whole step and a
	// step more (models.Config.LatestEnd), and never goes stale before
	// its lease. A store that keeps its lock times as unix seconds, or
	// sets its lock with a TTL in whole seconds (Redis's EX), holds a
	// claim of a 5 s LockTTL from 5 to 6 s, and the model's takeover at
	// the LockTTL failed it. Zero: the store's clock is as fine as the
	// history's. The risk: a client whose owner died waits up to that
	// much longer for a takeover.
	ClockStep time.Duration `json:"clock_step_ns,omitempty"`
}

// Extender is implemented by stores whose claims can be renewed while the
// work runs (a heartbeat): Extend moves the claim's lease to start now, only
// while the key is in flight under token (and, for LeaseBoundWrites, the
// lease has not run out); otherwise it returns ErrFenced. An owner whose
// work may outlast the lease extends it instead of risking a takeover.
type Extender interface {
	Extend(ctx context.Context, key KeyRef, token Token, now time.Time) error
}

// Fence maps a store's token to a fencing number that strictly increases
// with every claim of a key (across takeovers, releases and prunes, or,
// with Semantics.FenceRestartsPerLife, within each life of its record),
// so that systems downstream can reject a write from an older owner
// (Kleppmann's fencing token). ok is false for a token that carries no
// number. A store that declares one is checked for it: two claims of a key
// must never carry the same or a decreasing number. A store may give the
// number as a field of its Decision instead (Decision.Fence).
type Fence func(t Token) (n uint64, ok bool)

// FenceOf is a claim's fencing number: the Decision's Fence field when the
// store gave one, else fence's number for its token (fence may be nil).
// ok is false when neither gives a number.
func FenceOf(fence Fence, d Decision) (n uint64, ok bool) {
	if d.Fence != 0 {
		return d.Fence, true
	}
	if fence == nil {
		return 0, false
	}
	return fence(d.Token)
}
