// Package lease is the second reference store: an idempotency-key store in
// the style of the lease-based libraries teams adopt (Acquire, Heartbeat,
// Complete, Release), written here so that the harness's declared semantics
// (stores.Semantics) have a store that uses them all:
//
//   - ownership ends with the lease: a Complete, Release or Extend after
//     the claim's lease is refused (ErrFenced) even when nobody took over;
//   - Release keeps an "abandoned" record with the fingerprint until the
//     retention ends: the same parameters claim the key again, others get
//     Mismatch;
//   - a lease per request (stores.Request.Lease), renewed by Extend (a
//     heartbeat, stores.Extender);
//   - a token made of an owner id and a fencing number that increases with
//     every claim (Fence), so that systems downstream can fence an old
//     owner.
//
// It keeps its records in memory under one mutex and judges time by its
// own clock (stores.ServerClock), as a server would: a request's Now is
// ignored. Its mutants sit beside the correct code, one line away:
// fence-not-incremented (a takeover keeps the old fencing number),
// takeover-ignores-fingerprint (a stale claim is taken over by a request
// with other parameters) and request-clock (staleness judged by the
// request's Now).
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// Semantics are what the store declares beyond the contract.
var Semantics = stores.Semantics{LeaseBoundWrites: true, ReleaseKeepsFingerprint: true, PerRequestLease: true}

// Mutants lists the store's mutants: its rows of stores.Catalogue.
var Mutants = stores.MutantsOn("lease")

func init() {
	stores.Register(stores.Backend{
		Name:      "lease",
		CallWall:  500 * time.Microsecond,
		Clock:     stores.ServerClock,
		Lives:     stores.InProcess,
		Mutants:   Mutants,
		Semantics: Semantics,
		// One mutex, never held across a failpoint.
		WaitsAnnounced: true,
		Fence:          Fence,
		Open: func(_ context.Context, _ string, cfg stores.Config) (stores.Store, error) {
			s, err := New(cfg, nil)
			if err != nil {
				return nil, err // not a typed nil inside the interface
			}
			return s, nil
		},
	})
}

type status int

const (
	inFlight status = iota
	done
	abandoned // released: the fingerprint is kept, nobody owns the key
)

type record struct {
	fingerprint string
	status      status
	response    stores.Response
	owner       string        // the current claim's owner id
	fence       uint64        // the current claim's fencing number
	lockedAt    time.Time     // the current lease started here
	lease       time.Duration // and lasts this long
	createdAt   time.Time     // the first claim: retention counts from here
}

// Store is the lease store. It is safe for concurrent use.
type Store struct {
	cfg     stores.Config
	variant string
	clock   func() time.Time
	mu      sync.Mutex
	rows    map[stores.KeyRef]*record
	fences  uint64 // the last fencing number handed out, store-wide
}

var _ stores.Extender = (*Store)(nil)

// New makes an empty store of cfg.Variant; clock is its clock (nil: the
// machine's).
func New(cfg stores.Config, clock func() time.Time) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v := cfg.Variant
	if v == "" {
		v = stores.Correct
	}
	if v != stores.Correct && !slices.Contains(Mutants, v) {
		return nil, fmt.Errorf("lease: unknown variant %q (known: %s, %s)", v, stores.Correct, strings.Join(Mutants, ", "))
	}
	if clock == nil {
		clock = time.Now
	}
	return &Store{cfg: cfg, variant: v, clock: clock, rows: map[stores.KeyRef]*record{}}, nil
}

// Fence is the fencing number of a token: the number before the dot.
func Fence(t stores.Token) (uint64, bool) {
	n, _, ok := strings.Cut(string(t), ".")
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseUint(n, 10, 64)
	return f, err == nil
}

func (r *record) token() stores.Token {
	return stores.Token(fmt.Sprintf("%d.%s", r.fence, r.owner))
}

// claim gives the record a new owner and lease; fresh says whether the
// fencing number moves on (the fence-not-incremented mutant keeps it on a
// takeover).
func (s *Store) claim(r *record, now time.Time, lease time.Duration, fresh bool) stores.Token {
	var b [8]byte
	_, _ = rand.Read(b[:])
	r.owner, r.status, r.lockedAt, r.lease = hex.EncodeToString(b[:]), inFlight, now, lease
	if fresh {
		s.fences++
		r.fence = s.fences
	}
	return r.token()
}

// Begin acquires the key, or says why not.
func (s *Store) Begin(_ context.Context, req stores.Request) (stores.Decision, error) {
	if err := stores.ValidateKey(req.KeyRef); err != nil {
		return stores.Decision{}, err
	}
	lease := s.cfg.LockTTL
	if req.Lease > 0 {
		lease = req.Lease
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	d := stores.Decision{DecidedAt: now}
	r, ok := s.rows[req.KeyRef]
	if !ok {
		r = &record{fingerprint: req.Fingerprint, createdAt: now}
		s.rows[req.KeyRef] = r
		d.Outcome, d.Token = stores.Claimed, s.claim(r, now, lease, true)
		return d, nil
	}
	stale := r.status == inFlight && now.Sub(r.lockedAt) >= r.lease
	if s.variant == "request-clock" {
		stale = r.status == inFlight && req.Now.Sub(r.lockedAt) >= r.lease // the request's clock, not its own
	}
	mismatch := r.fingerprint != req.Fingerprint
	if s.variant == "takeover-ignores-fingerprint" && stale {
		mismatch = false // a stale claim goes to anyone
	}
	switch {
	case mismatch:
		d.Outcome = stores.Mismatch
	case r.status == abandoned: // acquire the abandoned record again
		d.Outcome, d.Token = stores.Claimed, s.claim(r, now, lease, true)
	case r.status == done:
		d.Outcome, d.Response = stores.Replay, r.response
	case !stale:
		d.Outcome = stores.InFlight
	default: // take the stale claim over: the mutex makes check and write one step
		d.Outcome, d.Takeover = stores.Claimed, true
		d.Token = s.claim(r, now, lease, s.variant != "fence-not-incremented")
	}
	return d, nil
}

// owned returns the key's record if tok owns it and its lease is running
// (ownership ends with the lease), else ErrFenced.
func (s *Store) owned(key stores.KeyRef, tok stores.Token) (*record, error) {
	if err := stores.ValidateKey(key); err != nil {
		return nil, err
	}
	r, ok := s.rows[key]
	if !ok || r.status != inFlight || r.token() != tok || s.clock().Sub(r.lockedAt) >= r.lease {
		return nil, stores.ErrFenced
	}
	return r, nil
}

// Complete saves the response while tok owns the key and its lease runs.
func (s *Store) Complete(_ context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, tok)
	if err != nil {
		return err
	}
	r.status, r.response = done, resp
	return nil
}

// Release abandons the claim while tok owns it: the record stays, with its
// fingerprint and no owner, until the retention ends.
func (s *Store) Release(_ context.Context, key stores.KeyRef, tok stores.Token) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, tok)
	if err != nil {
		return err
	}
	r.status, r.owner = abandoned, ""
	return nil
}

// Extend renews the lease from now (the store's clock) while tok owns the
// key and its lease runs: a heartbeat.
func (s *Store) Extend(_ context.Context, key stores.KeyRef, tok stores.Token, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.owned(key, tok)
	if err != nil {
		return err
	}
	r.lockedAt = s.clock()
	return nil
}

// Prune removes the records first claimed at least Retention ago, by the
// store's clock.
func (s *Store) Prune(context.Context, time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := s.clock(), 0
	for k, r := range s.rows {
		if now.Sub(r.createdAt) >= s.cfg.Retention {
			delete(s.rows, k)
			n++
		}
	}
	return n, nil
}

// Close does nothing: the records go with the store.
func (s *Store) Close() error { return nil }
