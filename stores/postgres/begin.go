package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Begin decides per the decision table, in the correct variant by three
// statements tried in turn, each of which decides or changes nothing: a
// read that answers a replay, a 409 or a 422 (replaySQL), an insert that
// claims a key without a row (claimSQL), and one statement that decides
// on the row there (beginSQL). Begin's function (beginFuncSQL) runs the
// three in one round trip. A hint (seen.Keys) sends the statement most
// likely to decide first, alone: the read for a key this Store has
// already decided a Begin on (a retry), the claim for a key it has not;
// the function follows only when that had no answer. The time it decides
// with is the server's, returned as DecidedAt; req.Now is bound but never
// judged by (only the request-clock mutant does). A network error or
// timeout is returned as an error: the claim may or may not have been
// made.
func (s *Store) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if err := stores.ValidateKey(req.KeyRef); err != nil {
		return stores.Decision{}, err
	}
	req.KeyRef = stores.StoredKey(s.variant, req.KeyRef) // case-folded-key, tenant-blind
	req.Fingerprint = stores.StoredFingerprint(s.variant, req.Fingerprint)
	switch s.stmts.split {
	case selectThenInsert:
		return s.beginSelectThenInsert(ctx, req)
	case blindTakeover, staleOverwrite, takeoverByState:
		return s.beginTakeoverOnRead(ctx, req)
	}
	if s.lateAfter > 0 {
		return stores.BeginInTime(req.KeyRef, s.lateAfter, func() (stores.Decision, error) { return s.begin(ctx, req) })
	}
	return s.begin(ctx, req)
}

// begin runs Begin's first statement alone (the read of a key seen, the
// claim of one not seen) and, when it has no answer, Begin's function; or,
// where the store could not make the function, the read, then beginSQL
// (which claims too).
func (s *Store) begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	var (
		decision, token string
		status          *int32
		body            []byte
		at              time.Time
	)
	args := []any{raw(req.Tenant), raw(req.Key), raw(req.Fingerprint), s.cfg.LockTTL, req.Now}
	query := func(q string, args []any) error {
		return s.queryRow(ctx, q, args...).Scan(&decision, &token, &status, &body, &at)
	}
	// read is Begin's read alone (replaySQL): an answer, or pgx.ErrNoRows
	// when it has none and the write must decide.
	read := func() error {
		err := query(s.sql.replay, args)
		if errors.Is(err, pgx.ErrNoRows) {
			faults.TraceBound(ctx, s.sql.replay, args, "no answer without a write: no row, or a stale claim")
		}
		return err
	}
	var err error
	plain := s.plainBegin.Load()
	// Begin's first statement goes alone when the hint says which one
	// will decide. A key this Store has seen (a retry) is read first
	// (replaySQL): its replay, 409 or 422 then skips the function, which
	// on the server costs about a third more than the statement bare. A
	// key not seen, most likely new, is claimed first (claimSQL): one
	// INSERT, like the raw write a claim is measured beside, without the
	// read before it and the function around it. Only when that
	// statement has no answer (a stale claim, or a key that another
	// process made) does the function decide, in a second round trip.
	// Either order gives the same answers, each from one statement that
	// decides or changes nothing; a wrong hint costs a round trip. A key
	// is marked seen once its Begin is decided, so the first calls of a
	// race all claim first, and the losers' claims meet the winner's
	// insert as they would inside the function.
	if plain || s.seen.Seen(req.Tenant, req.Key) {
		err = read()
	} else {
		err = query(s.sql.claim, args[:3])
		if errors.Is(err, pgx.ErrNoRows) {
			faults.TraceBound(ctx, s.sql.claim, args[:3], "0 rows: the key is there")
		}
	}
	if errors.Is(err, pgx.ErrNoRows) && !plain {
		err = query(s.beginCall(), args)
		// No function: the call found none and nothing ran (the schema's
		// function was dropped under the store; a pooler in transaction
		// mode ran a session function's call on a server session that
		// did not make it). The read, then beginSQL, as when the store
		// may not make one (plainBegin).
		if sqlState(err) == "42883" { // undefined_function
			plain = true
			err = read()
		}
	}
	if errors.Is(err, pgx.ErrNoRows) && plain {
		err = query(s.sql.begin, args) // claims too
	}
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.begin, args, "error: %v", err)
		return stores.Decision{}, callErr(ctx, "begin "+quote(req.KeyRef), err)
	}
	s.seen.Mark(req.Tenant, req.Key)
	if token == "" && decision != "claimed" && decision != "takeover" { // decided by reading alone
		faults.TraceBoundf(ctx, s.sql.replay, args, "%s, nothing written", decision)
	} else if decision == "claimed" && !plain { // claimSQL's row, or beginSQL's if the row went in between
		faults.TraceBoundf(ctx, s.sql.claim, args[:3], "claimed, token %s", faults.ShortToken(token))
	} else {
		faults.TraceBoundf(ctx, s.sql.begin, args, "decision=%s token=%s", decision, faults.ShortToken(token))
	}
	d := stores.Decision{DecidedAt: at}
	switch decision {
	case "claimed":
		d.Outcome, d.Token = stores.Claimed, stores.Token(token)
	case "takeover":
		d.Outcome, d.Token, d.Takeover = stores.Claimed, stores.Token(token), true
	case "replay":
		if status == nil {
			return stores.Decision{}, fmt.Errorf("postgres: begin %s: done row without a response status", quote(req.KeyRef))
		}
		d.Outcome, d.Response = stores.Replay, stores.Response{Status: int(*status), Body: string(body)}
	case "in_flight":
		d.Outcome = stores.InFlight
	case "mismatch":
		d.Outcome = stores.Mismatch
	default:
		return stores.Decision{}, fmt.Errorf("postgres: begin %s: unknown decision %q", quote(req.KeyRef), decision)
	}
	if s.syncReads && d.Outcome != stores.Claimed {
		// The decision only read, and what it read may be a commit still
		// waiting for the standby: Postgres shows a commit to other
		// sessions once it is local, before the standby has it. A write
		// to the key's own row (the same values: a new row version, a WAL
		// record) commits after it and waits for the standby to flush
		// everything before it, what was read included; only then is the
		// answer given. (A commit that writes no WAL, even one that took
		// a transaction id, does not wait: measured, the replay came back
		// during a cut to the standby.)
		barrier := `UPDATE ` + s.table + ` SET token = token WHERE tenant = $1 AND key = $2`
		bargs := []any{raw(req.Tenant), raw(req.Key)}
		if _, err := s.exec(ctx, barrier, bargs...); err != nil {
			faults.TraceBoundf(ctx, barrier, bargs, "error: %v", err)
			return stores.Decision{}, callErr(ctx, "begin "+quote(req.KeyRef)+": wait for the standby", err)
		}
		faults.TraceBound(ctx, barrier, bargs, "the standby has what the decision read")
	}
	return d, nil
}

// row is what the split mutants read before they write.
type row struct {
	status      string
	fingerprint []byte
	createdAt   time.Time
	stale       bool
}

// read is the first statement of the split mutants; found is false when
// there is no row.
func (s *Store) read(ctx context.Context, req stores.Request) (r row, found bool, err error) {
	args := []any{raw(req.Tenant), raw(req.Key), s.cfg.LockTTL}
	err = s.queryRow(ctx, s.sql.read, args...).
		Scan(&r.status, &r.fingerprint, &r.createdAt, &r.stale)
	if errors.Is(err, pgx.ErrNoRows) {
		faults.TraceBound(ctx, s.sql.read, args, "no row")
		return row{}, false, nil
	}
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.read, args, "error: %v", err)
		return row{}, false, callErr(ctx, "begin "+quote(req.KeyRef)+": read", err)
	}
	faults.TraceBoundf(ctx, s.sql.read, args, "status=%s stale=%v", r.status, r.stale)
	return r, true, nil
}

// beginSelectThenInsert is the classic bug: it reads, and when it saw no
// row it upserts a claim in a second statement. Between the two, another
// request sees the same "no row", and both claim.
func (s *Store) beginSelectThenInsert(ctx context.Context, req stores.Request) (stores.Decision, error) {
	_, found, err := s.read(ctx, req)
	if err != nil {
		return stores.Decision{}, err
	}
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil {
		return stores.Decision{}, err
	}
	if found { // decide on the row as it is now, as the reference store does
		return s.begin(ctx, req)
	}
	return s.overwrite(ctx, req, nil, "claimed") // overwrites a concurrent claim
}

// beginTakeoverOnRead re-creates three takeover bugs: staleness is judged
// on a read, and the write that follows does not compare-and-set on what
// was read. blind-takeover re-checks only that the row is still in flight,
// so two takers both win; takeover-by-state that it is in flight and
// stale, so it takes over a claim made since the read; stale-overwrite
// writes the whole row back, erasing a response saved since the read.
func (s *Store) beginTakeoverOnRead(ctx context.Context, req stores.Request) (stores.Decision, error) {
	r, found, err := s.read(ctx, req)
	if err != nil {
		return stores.Decision{}, err
	}
	if !found || r.status == "done" || !bytes.Equal(r.fingerprint, []byte(req.Fingerprint)) || !r.stale {
		return s.begin(ctx, req)
	}
	if err := faults.Hit(ctx, faults.BeginAfterSelect); err != nil {
		return stores.Decision{}, err
	}
	if s.stmts.split == staleOverwrite {
		return s.overwrite(ctx, req, &r.createdAt, "takeover")
	}
	var token string
	var at time.Time
	q, args := s.sql.blindTakeover, []any{raw(req.Tenant), raw(req.Key)}
	if s.stmts.split == takeoverByState {
		q, args = s.sql.byState, append(args, s.cfg.LockTTL)
	}
	err = s.queryRow(ctx, q, args...).Scan(&token, &at)
	if errors.Is(err, pgx.ErrNoRows) { // gone or done since the read (or, by state, not stale)
		faults.TraceBound(ctx, q, args, "0 rows: no longer in flight")
		return s.begin(ctx, req)
	}
	if err != nil {
		faults.TraceBoundf(ctx, q, args, "error: %v", err)
		return stores.Decision{}, callErr(ctx, "begin "+quote(req.KeyRef)+": takeover", err)
	}
	faults.TraceBoundf(ctx, q, args, "1 row: taken over, token %s", faults.ShortToken(token))
	return stores.Decision{Outcome: stores.Claimed, Token: stores.Token(token), Takeover: true, DecidedAt: at}, nil
}

// overwrite upserts a new claim over whatever row is there (overwriteSQL).
func (s *Store) overwrite(ctx context.Context, req stores.Request, createdAt *time.Time, decision string) (stores.Decision, error) {
	var token string
	var at time.Time
	args := []any{raw(req.Tenant), raw(req.Key), raw(req.Fingerprint), createdAt, decision}
	err := s.queryRow(ctx, s.sql.overwrite, args...).
		Scan(&token, &at)
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.overwrite, args, "error: %v", err)
		return stores.Decision{}, callErr(ctx, "begin "+quote(req.KeyRef)+": upsert", err)
	}
	faults.TraceBoundf(ctx, s.sql.overwrite, args, "1 row: claimed, token %s", faults.ShortToken(token))
	return stores.Decision{Outcome: stores.Claimed, Token: stores.Token(token), Takeover: decision == "takeover", DecidedAt: at}, nil
}
