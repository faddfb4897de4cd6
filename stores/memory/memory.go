// Package memory is the reference store: the decision table of docs/DESIGN.md §1
// over a map under one mutex, taking time from the caller's clock. Its
// mutants sit in the same functions, each one line away from the correct
// code, so the two can be read side by side.
package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

func init() {
	stores.Register(stores.Backend{
		Name:     "memory",
		CallWall: 500 * time.Microsecond,
		Clock:    stores.CallerClock,
		Lives:    stores.InProcess,
		Mutants:  Mutants,
		// One mutex, released before every failpoint.
		WaitsAnnounced: true,
		Open: func(_ context.Context, _ string, cfg stores.Config) (stores.Store, error) {
			s, err := New(cfg)
			if err != nil {
				return nil, err // not a typed nil inside the interface
			}
			return s, nil
		},
	})
}

// Mutants lists the mutant variants this backend implements: its rows of
// stores.Catalogue.
var Mutants = stores.MutantsOn("memory")

type record struct {
	fingerprint string
	done        bool
	response    stores.Response
	lockedAt    time.Time
	createdAt   time.Time
	token       stores.Token
}

// Store is the in-memory reference store. It is safe for concurrent use.
type Store struct {
	cfg     stores.Config
	variant string
	// mu guards rows: writers hold it, and Begin on a done key only reads
	// under RLock (see Begin).
	mu   sync.RWMutex
	rows map[stores.KeyRef]*record
}

// New makes an empty store of cfg.Variant.
func New(cfg stores.Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v := cfg.Variant
	if v == "" {
		v = stores.Correct
	}
	if v != stores.Correct && !slices.Contains(Mutants, v) {
		return nil, fmt.Errorf("memory: unknown variant %q", v)
	}
	return &Store{cfg: cfg, variant: v, rows: map[stores.KeyRef]*record{}}, nil
}

// newToken returns a random 128-bit owner id: unique across the key's life.
func newToken() stores.Token {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return stores.Token(hex.EncodeToString(b[:]))
}

// token picks the claim's fencing token. The token-reuse mutant uses the
// card's scheme, locked_at in milliseconds, which comes back after a release.
func (s *Store) token(now time.Time) stores.Token {
	if s.variant == "token-reuse" {
		return stores.Token(fmt.Sprint(now.UnixMilli()))
	}
	return newToken()
}

// Begin decides per the decision table, atomically under the mutex.
func (s *Store) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if err := stores.ValidateKey(req.KeyRef); err != nil {
		return stores.Decision{}, err
	}
	req.KeyRef = stores.StoredKey(s.variant, req.KeyRef) // case-folded-key, tenant-blind
	req.Fingerprint = stores.StoredFingerprint(s.variant, req.Fingerprint)
	switch s.variant {
	case "select-then-insert":
		return s.beginSelectThenInsert(ctx, req)
	case "blind-takeover", "stale-overwrite", "takeover-by-state":
		return s.beginTakeoverOnRead(ctx, req)
	}
	// A done key is decided under the read lock, writing nothing: decide
	// changes a row only to claim or take it over, which a done row never
	// is, and a done row stays done until deleted, so readers replay beside
	// each other while the decision stays the one the write lock would give.
	s.mu.RLock()
	if r, ok := s.rows[req.KeyRef]; ok && r.done {
		d := s.decide(req, r, ok)
		s.mu.RUnlock()
		traceDecided(ctx, "read-lock; decide on rows[key] (done); unlock", d)
		return d, nil
	}
	s.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[req.KeyRef]
	d := s.decide(req, r, ok)
	traceDecided(ctx, "lock; decide on rows[key]; unlock", d)
	return d, nil
}

// traceDecided traces stmt with what Begin decided, described only when
// someone listens (faults.Tracing): a description costs more than the
// decision it describes.
func traceDecided(ctx context.Context, stmt string, d stores.Decision) {
	if faults.Tracing(ctx) {
		faults.Trace(ctx, stmt, traceDecision(d))
	}
}

// traceDecision says what Begin decided, for faults.Trace.
func traceDecision(d stores.Decision) string {
	switch d.Outcome {
	case stores.Claimed:
		tk := ""
		if d.Takeover {
			tk = " (takeover)"
		}
		return fmt.Sprintf("claimed, token %s%s", faults.ShortToken(string(d.Token)), tk)
	case stores.Replay:
		return fmt.Sprintf("replay %d %q", d.Response.Status, d.Response.Body)
	}
	return fmt.Sprintf("%s (%d)", d.Outcome, d.Outcome.HTTPStatus())
}

// traceRow says what a split mutant's read saw, for faults.Trace.
func traceRow(r *record, ok bool) string {
	switch {
	case !ok:
		return "no row"
	case r.done:
		return "done"
	}
	return fmt.Sprintf("in flight, token %s", faults.ShortToken(string(r.token)))
}

// beginTakeoverOnRead re-creates two takeover bugs: the staleness is judged
// on a read, and the write that follows does not compare-and-set on it.
// blind-takeover re-checks only that the row is still in flight, so two
// takers both win; takeover-by-state that it is in flight and stale, so a
// taker takes over another request's claim made since its read;
// stale-overwrite writes the whole row back, erasing a response saved
// since the read.
func (s *Store) beginTakeoverOnRead(ctx context.Context, req stores.Request) (stores.Decision, error) {
	s.mu.Lock()
	r, ok := s.rows[req.KeyRef]
	if !ok || r.done || r.fingerprint != req.Fingerprint || req.Now.Sub(r.lockedAt) < s.cfg.LockTTL {
		defer s.mu.Unlock()
		d := s.decide(req, r, ok)
		traceDecided(ctx, "lock; decide on rows[key]; unlock", d)
		return d, nil
	}
	createdAt := r.createdAt
	if faults.Tracing(ctx) {
		faults.Trace(ctx, "lock; read rows[key]; unlock", traceRow(r, ok)+", stale")
	}
	s.mu.Unlock()
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil {
		return stores.Decision{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := s.token(req.Now)
	cur, ok := s.rows[req.KeyRef]
	if s.variant == "blind-takeover" || s.variant == "takeover-by-state" {
		// UPDATE … WHERE status = 'in_flight' (no token compared);
		// takeover-by-state: AND stale, whoever's claim it is now.
		if !ok || cur.done || s.variant == "takeover-by-state" && req.Now.Sub(cur.lockedAt) < s.cfg.LockTTL {
			d := s.decide(req, cur, ok)
			traceDecided(ctx, "lock; decide on rows[key]; unlock", d)
			return d, nil
		}
		cur.lockedAt, cur.token = req.Now, tok
	} else { // stale-overwrite: INSERT OR REPLACE of the row as read
		s.rows[req.KeyRef] = &record{fingerprint: req.Fingerprint, lockedAt: req.Now, createdAt: createdAt, token: tok}
	}
	d := stores.Decision{Outcome: stores.Claimed, Token: tok, Takeover: true, DecidedAt: req.Now}
	traceDecided(ctx, "lock; rows[key] = new claim, decided on the read; unlock", d)
	return d, nil
}

// decide applies the decision table to the row (held under the mutex).
func (s *Store) decide(req stores.Request, r *record, ok bool) stores.Decision {
	now := req.Now
	if !ok {
		tok := s.token(now)
		s.rows[req.KeyRef] = &record{fingerprint: req.Fingerprint, lockedAt: now, createdAt: now, token: tok}
		return stores.Decision{Outcome: stores.Claimed, Token: tok, DecidedAt: now}
	}
	stale := now.Sub(r.lockedAt) >= s.cfg.LockTTL
	mismatch := r.fingerprint != req.Fingerprint
	switch s.variant {
	case "no-fingerprint":
		mismatch = false
	case "takeover-ignores-fingerprint":
		mismatch = mismatch && (r.done || !stale) // a stale claim goes to anyone
	case "stale-boundary":
		stale = now.Sub(r.lockedAt) > s.cfg.LockTTL // stale only past LockTTL, not at it
	}
	if mismatch {
		return stores.Decision{Outcome: stores.Mismatch, DecidedAt: now}
	}
	if r.done {
		return stores.Decision{Outcome: stores.Replay, Response: r.response, DecidedAt: now}
	}
	if s.variant == "no-takeover" {
		stale = false
	}
	if !stale {
		return stores.Decision{Outcome: stores.InFlight, DecidedAt: now}
	}
	// Compare-and-set: the mutex makes the check and the write one step.
	tok := s.token(now)
	r.lockedAt, r.token = now, tok
	return stores.Decision{Outcome: stores.Claimed, Token: tok, Takeover: true, DecidedAt: now}
}

// beginSelectThenInsert is the classic bug: it reads, lets go, and writes.
// Between the two, another request sees the same "no row" and both claim.
func (s *Store) beginSelectThenInsert(ctx context.Context, req stores.Request) (stores.Decision, error) {
	s.mu.Lock()
	r, ok := s.rows[req.KeyRef]
	var snapshot record
	if ok {
		snapshot = *r
	}
	if faults.Tracing(ctx) {
		faults.Trace(ctx, "lock; read rows[key]; unlock", traceRow(r, ok))
	}
	s.mu.Unlock()
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil {
		return stores.Decision{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		tok := s.token(req.Now)
		s.rows[req.KeyRef] = &record{fingerprint: req.Fingerprint, lockedAt: req.Now, createdAt: req.Now, token: tok} // upsert: overwrites a concurrent claim
		d := stores.Decision{Outcome: stores.Claimed, Token: tok, DecidedAt: req.Now}
		traceDecided(ctx, "lock; rows[key] = new claim (the read saw none); unlock", d)
		return d, nil
	}
	var d stores.Decision
	if cur := s.rows[req.KeyRef]; cur != nil {
		d = s.decide(req, cur, true)
	} else {
		d = s.decide(req, &snapshot, false)
	}
	traceDecided(ctx, "lock; decide on rows[key]; unlock", d)
	return d, nil
}

// Complete saves the response under the token (fenced).
func (s *Store) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	const stmt = "lock; if rows[key] in flight under my token: save done + response; unlock"
	return s.fencedWrite(ctx, key, tok, stmt, "unfenced-complete", "complete-overwrites-done", "", func(r *record) string {
		r.done, r.response = true, resp
		return "saved " + strconv.Itoa(resp.Status)
	})
}

// Release deletes the claim under the token (fenced).
func (s *Store) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	const stmt = "lock; if rows[key] in flight under my token: delete rows[key]; unlock"
	return s.fencedWrite(ctx, key, tok, stmt, "unfenced-release", "release-deletes-done", "release-token-like", func(*record) string {
		delete(s.rows, stores.StoredKey(s.variant, key))
		return "deleted"
	})
}

// fencedWrite applies write to the key's row only while the row is in
// flight under tok; otherwise ErrFenced. The unfenced mutant skips the
// fence; the doneMutant checks the token but not that the key is in
// flight; the patternMutant (if not "") matches tok as a glob pattern
// (path.Match), where an equality belongs.
func (s *Store) fencedWrite(ctx context.Context, key stores.KeyRef, tok stores.Token, stmt, unfencedMutant, doneMutant, patternMutant string, write func(*record) string) error {
	if err := stores.ValidateKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[stores.StoredKey(s.variant, key)]
	if !ok {
		faults.Trace(ctx, stmt, "no row: fenced")
		return stores.ErrFenced
	}
	fenced := r.done || r.token != tok
	switch s.variant {
	case unfencedMutant:
		fenced = false
	case doneMutant:
		fenced = r.token != tok // a done key's last owner may write again
	}
	if patternMutant != "" && s.variant == patternMutant {
		match, _ := path.Match(string(tok), string(r.token)) // "*" matches every token
		fenced = r.done || !match
	}
	if fenced {
		faults.Trace(ctx, stmt, "fenced")
		return stores.ErrFenced
	}
	faults.Trace(ctx, stmt, write(r))
	return nil
}

// Prune removes keys created more than Retention before now. The
// short-retention mutant keeps them only for LockTTL.
func (s *Store) Prune(ctx context.Context, now time.Time) (int, error) {
	keep := s.cfg.Retention
	if s.variant == "short-retention" {
		keep = s.cfg.LockTTL
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	var names map[string]bool // prune-drops-tenant: the expired keys' names
	for k, r := range s.rows {
		expired := now.Sub(r.createdAt) >= keep
		switch s.variant {
		case "never-expire":
			expired = false
		case "prune-sweeps-in-flight":
			expired = expired || !r.done // "abandoned" claims, young or not
		case "created-in-seconds":
			expired = now.Sub(r.createdAt.Truncate(time.Second)) >= keep // the creation time's second, not the time
		case "prune-drops-tenant":
			if expired {
				if names == nil {
					names = map[string]bool{}
				}
				names[k.Key] = true
			}
			continue
		}
		if expired {
			delete(s.rows, k)
			n++
		}
	}
	for k := range s.rows {
		if names == nil {
			break // the correct store's prune walks the rows once
		}
		if names[k.Key] { // the name's rows in every tenant, young or not
			delete(s.rows, k)
			n++
		}
	}
	faults.Tracef(ctx, "lock; delete rows created before now - retention; unlock", "%d deleted", n)
	return n, nil
}

// Close does nothing: the map goes with the store.
func (s *Store) Close() error { return nil }

// ShowRow describes the key's row (stores.RowShower), for a demo. It does
// not wait for the store's lock: a client may hold it while a demo's
// scheduler holds the client.
func (s *Store) ShowRow(_ context.Context, key stores.KeyRef) (string, error) {
	if !s.mu.TryLock() {
		return "(locked by a client)", nil
	}
	defer s.mu.Unlock()
	r, ok := s.rows[stores.StoredKey(s.variant, key)]
	if !ok {
		return stores.NoRow, nil
	}
	status := "in_flight"
	if r.done {
		status = "done"
	}
	return stores.RowLine(status, string(r.token), r.fingerprint, r.response.Status, r.response.Body), nil
}
