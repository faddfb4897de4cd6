package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Begin decides per the decision table. The correct store decides in at
// most three steps, each one atomic decision or none: the claim alone
// (claimAlone: one INSERT, claimed or not), the read alone (replayOnRead:
// a replay, a 409 or a 422 from a committed snapshot, or nothing), and
// the write transaction (decide, under BEGIN IMMEDIATE), which decides
// whatever the first two left open: a takeover, or a key claimed or
// removed between them. A key this Store has not seen (seen.Keys) is
// claimed first, a seen one read first. Either order gives the same
// answers; the hint saves a round trip: a new key's claim skips the read
// (under 8 writers it cost a claim a fifth of its time), and a retry's
// replay, 409 or 422 does not wait for the write lock. The first call
// on a key another process claimed does wait for it, once per process,
// as every call did before replays were read (docs/DESIGN.md §8).
func (s *Store) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if err := stores.ValidateKey(req.KeyRef); err != nil {
		return stores.Decision{}, err
	}
	if _, err := unixNano(req.Now); err != nil {
		return stores.Decision{}, err
	}
	req.Fingerprint = stores.StoredFingerprint(s.variant, req.Fingerprint)
	switch s.variant {
	case "select-then-insert":
		return s.beginSelectThenInsert(ctx, req)
	case "process-lock":
		// The same read-then-write, one at a time in this process only.
		s.processLock.Lock()
		defer s.processLock.Unlock()
		return s.beginSelectThenInsert(ctx, req)
	case "blind-takeover", "stale-overwrite", "takeover-by-state":
		return s.beginTakeoverOnRead(ctx, req)
	}
	key := stores.StoredKey(s.variant, req.KeyRef)
	seen := s.seen.See(key.Tenant, key.Key)
	if !seen {
		// Most likely a new key: claim it, and read only if it is there.
		if d, ok, err := s.claimAlone(ctx, req); err != nil || ok {
			return s.afterBusy(ctx, req, d, err)
		}
	}
	d, ok, absent, err := s.replayOnRead(ctx, req)
	if err != nil || ok {
		return d, err
	}
	if absent && seen {
		if d, ok, err := s.claimAlone(ctx, req); err != nil || ok {
			return s.afterBusy(ctx, req, d, err)
		}
	}
	d, err = s.inTx(ctx, func(tx *writeTx) (stores.Decision, error) { return s.decide(ctx, tx, req) })
	return s.afterBusy(ctx, req, d, err)
}

// afterBusy answers a Begin whose write found no turn within the busy
// timeout (ErrBusy: it wrote nothing) from a read of the key, when the
// row read then settles it (replayOnRead: a replay, a 409 or a 422),
// and passes any other result through. Under a pile-up of writers (a
// check at --keys 50, six clients a key, on a loaded machine) the
// Begins queued behind a key's claim waited out the busy timeout and
// failed, though the claim they waited behind had long committed: a
// correct store failed --strict-availability. The read is a decision of
// its own, linearized at the read (see replayOnRead).
func (s *Store) afterBusy(ctx context.Context, req stores.Request, d stores.Decision, err error) (stores.Decision, error) {
	if !errors.Is(err, ErrBusy) || ctx.Err() != nil {
		return d, err
	}
	if rd, ok, _, rerr := s.replayOnRead(ctx, req); rerr == nil && ok {
		return rd, nil
	}
	return d, err
}

// claimAlone claims a key that is likely absent (not seen, or found absent
// by the read) with the claim statement alone, in autocommit on the
// writer's connection, in the writer's turn: one INSERT … ON CONFLICT DO
// NOTHING is one atomic decision, as the same statement first in a write
// transaction is, and saves that transaction's BEGIN IMMEDIATE and COMMIT
// round trips (a claim of a new key is the commonest write). One row
// changed: claimed. None: the key is there, and ok is false: the caller
// reads it, or decides in a write transaction, which reads the row under
// the write lock. The failpoint a harness crashes a claim at before its
// commit is hit before the statement: either way the caller fails having
// written nothing.
func (s *Store) claimAlone(ctx context.Context, req stores.Request) (stores.Decision, bool, error) {
	done, err := s.write(ctx)
	if err != nil {
		return stores.Decision{}, false, fmt.Errorf("sqlite: begin: %w", err)
	}
	defer done()
	tx, err := s.writerConn(ctx)
	if err != nil {
		return stores.Decision{}, false, fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := faults.Hit(ctx, faults.BeginBeforeCommit); err != nil {
		return stores.Decision{}, false, err
	}
	tok := s.tokenFor(req.Now)
	args := s.beginArgs(req, tok)
	res, err := tx.claim.ExecContext(ctx, args...)
	n, err := changed(res, err)
	if err != nil {
		return stores.Decision{}, false, fmt.Errorf("sqlite: begin: claim: %w", busy(err))
	}
	if n == 0 {
		faults.TraceBound(ctx, s.sql.claim, args, "0 rows: the key is there")
		return stores.Decision{}, false, nil
	}
	faults.TraceBoundf(ctx, s.sql.claim, args, "1 row: claimed, token %s", faults.ShortToken(string(tok)))
	return stores.Decision{Outcome: stores.Claimed, Token: tok, DecidedAt: req.Now}, true, nil
}

// replayOnRead decides a Begin without the write lock when the key's row
// settles it: one SELECT in autocommit, which in WAL mode reads a
// committed snapshot beside the writer instead of queueing behind it. ok
// is false, and nothing is decided, when there is no row (absent: a
// claim, see claimAlone) or the row is a stale claim of the same
// fingerprint (a takeover, decided in the write transaction, whose read
// and compare-and-set stay one atomic decision). Otherwise the answer is
// what decide would answer on that row: Mismatch (another fingerprint),
// Replay (done) or InFlight (a live claim), judged by the replay
// statement as the read statement judges them (readPair), so a mutant's
// judgement is kept.
//
// Answering from the snapshot, writing nothing, is linearized at the read:
// the snapshot is a committed state the key was in during the call, and in
// that state, at the request's Now, the decision table gives that answer
// and changes nothing (models.Decide: a 422, a replay or a 409 leave the
// key as it was). A later commit cannot make the answer wrong: the call is
// placed at the read, before it. This is the argument that made replays
// read-only, and it holds for a 409 and a 422 on a claim in flight too: a
// retry storm's 409s no longer queue for the file's write lock behind the
// owner's save.
func (s *Store) replayOnRead(ctx context.Context, req stores.Request) (d stores.Decision, ok, absent bool, err error) {
	// A round trip of its own: a harness may interleave a caller between
	// this read and the write transaction that follows it.
	if err := faults.Hit(ctx, faults.BeforeRoundTrip); err != nil {
		return stores.Decision{}, false, false, err
	}
	var (
		judged   int64          // the judged bits, and the saved status above them (readAnswer)
		respBody sql.NullString // a string at once: a []byte is copied again by Scan
	)
	// Prepared once per connection (database/sql would parse it again on
	// every call), with only the parameters it reads, bound by position
	// (see positional); :lock_ttl, the Store's own, is made once.
	key := stores.StoredKey(s.variant, req.KeyRef) // case-folded-key, tenant-blind
	var buf [5]any
	pos := buf[:0]
	for _, p := range s.replayParams {
		switch p {
		case paramTenant:
			pos = append(pos, blob(key.Tenant))
		case paramKey:
			pos = append(pos, blob(key.Key))
		case paramFingerprint:
			pos = append(pos, blob(req.Fingerprint))
		case paramNow:
			pos = append(pos, req.Now.UnixNano())
		case paramLockTTL:
			pos = append(pos, s.lockTTLArg)
		}
	}
	err = s.replayStmt.QueryRowContext(ctx, pos...).Scan(&judged, &respBody)
	respStatus := judged >> 3 // floor(judged / 8), a negative status too
	judged &= judgedAll
	var args []any // the named parameters, for a trace only
	if faults.Tracing(ctx) {
		args = s.beginArgs(req, "")
	}
	if errors.Is(err, sql.ErrNoRows) {
		faults.TraceBound(ctx, s.sql.replay, args, "no row: claim")
		return stores.Decision{}, false, true, nil
	}
	if err != nil {
		return stores.Decision{}, false, false, fmt.Errorf("sqlite: begin: read: %w", err)
	}
	sameFP, done, stale := judged&judgedSameFP != 0, judged&judgedDone != 0, judged&judgedStale != 0
	switch {
	case !sameFP:
		faults.TraceBound(ctx, s.sql.replay, args, "another fingerprint: mismatch")
		return stores.Decision{Outcome: stores.Mismatch, DecidedAt: req.Now}, true, false, nil
	case done:
		faults.TraceBound(ctx, s.sql.replay, args, "done: replay")
		return stores.Decision{Outcome: stores.Replay, Response: stores.Response{Status: int(respStatus), Body: respBody.String}, DecidedAt: req.Now}, true, false, nil
	case !stale:
		faults.TraceBound(ctx, s.sql.replay, args, "in flight, live: 409")
		return stores.Decision{Outcome: stores.InFlight, DecidedAt: req.Now}, true, false, nil
	}
	faults.TraceBound(ctx, s.sql.replay, args, "in flight, stale: take over in a write transaction")
	return stores.Decision{}, false, false, nil
}

// writeTx is Begin's write transaction: the Store's writer connection
// (see writerConn) inside BEGIN IMMEDIATE.
type writeTx struct {
	*sql.Conn
	claim *sql.Stmt // sql.claim, prepared on this connection
}

// inTx runs step in one write transaction (BEGIN IMMEDIATE) on the
// Store's writer connection and commits it. The failpoint before the
// commit lets a harness crash the caller there: the error rolls
// everything back.
//
// The transaction is two statements on a connection the Store keeps, not
// a database/sql Tx: a Tx takes a pooled connection and starts a goroutine
// to watch the context, which cost a claim 25 µs (a tenth of its fsync'd
// commit) over an INSERT in autocommit; BEGIN IMMEDIATE and COMMIT as
// statements cost 5 µs. A Tx also rolls back when its context ends; here
// every way out but the commit sends ROLLBACK (a no-op when SQLite has
// already rolled back, or when BEGIN failed).
func (s *Store) inTx(ctx context.Context, step func(*writeTx) (stores.Decision, error)) (stores.Decision, error) {
	done, err := s.write(ctx)
	if err != nil {
		return stores.Decision{}, fmt.Errorf("sqlite: begin: %w", err)
	}
	defer done()
	tx, err := s.writerConn(ctx)
	if err != nil {
		return stores.Decision{}, fmt.Errorf("sqlite: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			s.rollback(tx)
		}
	}() // runs before done(): the next writer finds no transaction open
	if _, err := tx.ExecContext(ctx, s.begin); err != nil {
		return stores.Decision{}, fmt.Errorf("sqlite: begin: %w", busy(err))
	}
	faults.Trace(ctx, s.begin, "write lock taken")
	d, err := step(tx)
	if err != nil {
		return stores.Decision{}, err
	}
	if err := faults.Hit(ctx, faults.BeginBeforeCommit); err != nil {
		return stores.Decision{}, err
	}
	if _, err := tx.ExecContext(ctx, "COMMIT"); err != nil {
		return stores.Decision{}, fmt.Errorf("sqlite: begin: commit: %w", busy(err))
	}
	committed = true
	faults.Trace(ctx, "COMMIT", "write lock released")
	return d, nil
}

// writerConn is the connection of this Store's write transactions, made
// (with sql.claim prepared on it) the first time one needs it, or again
// after the last one broke. Called in the writer's turn, which guards it.
func (s *Store) writerConn(ctx context.Context) (*writeTx, error) {
	if tx := s.wtx.Load(); tx != nil {
		return tx, nil
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	claim, err := c.PrepareContext(ctx, s.sql.claim)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("prepare: %w", describe(err))
	}
	tx := &writeTx{Conn: c, claim: claim}
	s.wtx.Store(tx)
	return tx, nil
}

// rollback ends a write transaction that did not commit, on a context of
// its own: the caller's may be what ended it. SQLite answers an error
// when no transaction is open (BEGIN failed, or an error already rolled it
// back), which is expected; a connection that cannot even say that is
// dropped, and the next write transaction opens another.
func (s *Store) rollback(tx *writeTx) {
	ctx, cancel := context.WithTimeout(context.Background(), s.busyTimeout)
	defer cancel()
	_, err := tx.ExecContext(ctx, "ROLLBACK")
	if err == nil || primaryCode(err) == sqlite3.SQLITE_ERROR {
		return
	}
	s.wtx.CompareAndSwap(tx, nil)
	tx.claim.Close()
	tx.Close()
}

// beginArgs are the parameters of Begin's statements, with tok the token a
// claim made now would get.
func (s *Store) beginArgs(req stores.Request, tok stores.Token, extra ...any) []any {
	return s.args(req.KeyRef, append([]any{
		sql.Named("fingerprint", blob(req.Fingerprint)),
		sql.Named("now", req.Now.UnixNano()), // range checked by Begin
		sql.Named("token", string(tok)),
	}, extra...)...)
}

// decide is the decision table, inside the caller's write transaction: claim
// the key if absent; otherwise read the row in the same transaction and
// answer Mismatch, Replay or InFlight, or take over a stale claim with a
// compare-and-set on the token read.
func (s *Store) decide(ctx context.Context, tx *writeTx, req stores.Request) (stores.Decision, error) {
	now := req.Now
	tok := s.tokenFor(now)
	args := s.beginArgs(req, tok)
	res, err := tx.claim.ExecContext(ctx, args...)
	if n, err := changed(res, err); err != nil {
		return stores.Decision{}, fmt.Errorf("sqlite: begin: claim: %w", err)
	} else if n == 1 {
		faults.TraceBoundf(ctx, s.sql.claim, args, "1 row: claimed, token %s", faults.ShortToken(string(tok)))
		return stores.Decision{Outcome: stores.Claimed, Token: tok, DecidedAt: now}, nil
	}
	faults.TraceBound(ctx, s.sql.claim, args, "0 rows: the key exists")
	r, found, err := s.read(ctx, tx, req)
	if err != nil {
		return stores.Decision{}, err
	}
	if !found { // the insert conflicted, so the row is there: we hold the write lock
		return stores.Decision{}, errors.New("sqlite: begin: claim conflicted but no row found")
	}
	switch {
	case !r.sameFP:
		return stores.Decision{Outcome: stores.Mismatch, DecidedAt: now}, nil
	case r.done:
		return stores.Decision{Outcome: stores.Replay, Response: r.response, DecidedAt: now}, nil
	case !r.stale:
		return stores.Decision{Outcome: stores.InFlight, DecidedAt: now}, nil
	}
	args = s.beginArgs(req, tok, sql.Named("old_token", string(r.token)))
	res, err = tx.ExecContext(ctx, s.sql.takeover, args...)
	if n, err := changed(res, err); err != nil {
		return stores.Decision{}, fmt.Errorf("sqlite: begin: takeover: %w", err)
	} else if n == 0 { // another taker won the compare-and-set
		faults.TraceBound(ctx, s.sql.takeover, args, "0 rows: another taker won")
		return stores.Decision{Outcome: stores.InFlight, DecidedAt: now}, nil
	}
	faults.TraceBoundf(ctx, s.sql.takeover, args, "1 row: taken over, token %s", faults.ShortToken(string(tok)))
	return stores.Decision{Outcome: stores.Claimed, Token: tok, Takeover: true, DecidedAt: now}, nil
}

func changed(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// row is a key's row as Begin's read judges it.
type row struct {
	sameFP, done, stale bool
	response            stores.Response
	token               stores.Token
	createdAt           int64
}

// querier is a transaction or, for the mutants' reads outside any write
// transaction, the pool.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// read returns the key's row judged against the request (found false when
// there is none).
func (s *Store) read(ctx context.Context, q querier, req stores.Request) (row, bool, error) {
	var (
		r          row
		respStatus sql.NullInt64
		respBody   []byte
		token      string
	)
	args := s.beginArgs(req, "")
	err := q.QueryRowContext(ctx, s.sql.read, args...).
		Scan(&r.sameFP, &r.done, &respStatus, &respBody, &r.stale, &token, &r.createdAt)
	if errors.Is(err, sql.ErrNoRows) {
		faults.TraceBound(ctx, s.sql.read, args, "no row")
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, fmt.Errorf("sqlite: begin: read: %w", err)
	}
	r.token = stores.Token(token)
	r.response = stores.Response{Status: int(respStatus.Int64), Body: string(respBody)}
	faults.TraceBoundf(ctx, s.sql.read, args, "same_fp=%v done=%v stale=%v token=%s", r.sameFP, r.done, r.stale, faults.ShortToken(string(r.token)))
	return r, true, nil
}

// beginSelectThenInsert is the classic bug: it reads the key outside any
// write transaction, lets go, and then writes. Between the two, another
// request sees the same "no row", and both upsert and both claim.
func (s *Store) beginSelectThenInsert(ctx context.Context, req stores.Request) (stores.Decision, error) {
	_, found, err := s.read(ctx, s.db, req) // a plain SELECT, no lock held after it
	if err != nil {
		return stores.Decision{}, err
	}
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil {
		return stores.Decision{}, err
	}
	if found { // decides on the row as it is now, as the reference store does
		return s.inTx(ctx, func(tx *writeTx) (stores.Decision, error) { return s.decide(ctx, tx, req) })
	}
	return s.inTx(ctx, func(tx *writeTx) (stores.Decision, error) {
		tok := s.tokenFor(req.Now)
		args := s.beginArgs(req, tok)
		if _, err := tx.ExecContext(ctx, s.sql.claimAfterRead, args...); err != nil {
			return stores.Decision{}, fmt.Errorf("sqlite: begin: upsert: %w", err)
		}
		faults.TraceBoundf(ctx, s.sql.claimAfterRead, args, "1 row: claimed, token %s", faults.ShortToken(string(tok)))
		return stores.Decision{Outcome: stores.Claimed, Token: tok, DecidedAt: req.Now}, nil
	})
}

// beginTakeoverOnRead re-creates two takeover bugs: staleness is judged on a
// read outside any write transaction, and the write that follows does not
// compare-and-set on what was read. blind-takeover updates any in-flight row,
// so two takers both win; stale-overwrite writes the whole row back with
// INSERT OR REPLACE, erasing a response saved since the read.
func (s *Store) beginTakeoverOnRead(ctx context.Context, req stores.Request) (stores.Decision, error) {
	r, found, err := s.read(ctx, s.db, req)
	if err != nil {
		return stores.Decision{}, err
	}
	if !found || !r.sameFP || r.done || !r.stale { // no takeover: decided as correct
		return s.inTx(ctx, func(tx *writeTx) (stores.Decision, error) { return s.decide(ctx, tx, req) })
	}
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil {
		return stores.Decision{}, err
	}
	return s.inTx(ctx, func(tx *writeTx) (stores.Decision, error) {
		tok := s.tokenFor(req.Now)
		args := s.beginArgs(req, tok, sql.Named("created_at", r.createdAt))
		res, err := tx.ExecContext(ctx, s.sql.takeoverAfterRead, args...)
		if n, err := changed(res, err); err != nil {
			return stores.Decision{}, fmt.Errorf("sqlite: begin: takeover: %w", err)
		} else if n == 0 { // blind-takeover: no longer in flight (done or gone)
			faults.TraceBound(ctx, s.sql.takeoverAfterRead, args, "0 rows: no longer in flight")
			return s.decide(ctx, tx, req)
		}
		faults.TraceBoundf(ctx, s.sql.takeoverAfterRead, args, "1 row: taken over, token %s", faults.ShortToken(string(tok)))
		return stores.Decision{Outcome: stores.Claimed, Token: tok, Takeover: true, DecidedAt: req.Now}, nil
	})
}
