// Package postgres is the Postgres store: the decision table of docs/DESIGN.md §1
// in single SQL statements over a pgx connection pool, judging staleness and
// retention by the server's clock (clock_timestamp()), so every client agrees
// on the time. Its mutants are SQL texts beside the correct ones
// (statements.go), each a line or two away from them.
//
// Each store lives in one schema (Config.Namespace, else "idemcheck") with
// one table, idempotency_keys, created on first use.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

func init() {
	stores.Register(stores.Backend{
		Name:     "postgres",
		CallWall: 4 * time.Millisecond, FaultWall: 30 * time.Second,
		Clock:      stores.ServerClock,
		Lives:      stores.Server,
		Mutants:    Mutants,
		Statements: true,
		Equivalent: Equivalent,
		// Every statement commits on its own: no row lock outlives a
		// statement, so none is held across a failpoint; the pool
		// (defaultMaxConns) outnumbers an episode's clients.
		WaitsAnnounced: true,
		Open: func(ctx context.Context, dsn string, cfg stores.Config) (stores.Store, error) {
			return New(ctx, dsn, cfg)
		},
	})
	stores.Register(stores.Backend{
		Name:     "postgres-replicated",
		CallWall: 5 * time.Millisecond, FaultWall: 30 * time.Second,
		Clock:      stores.ServerClock,
		Lives:      stores.Server,
		Replicated: "postgres",
		Mutants:    stores.MutantsOn("postgres-replicated"),
		Open: func(ctx context.Context, dsn string, cfg stores.Config) (stores.Store, error) {
			return NewReplicated(ctx, dsn, cfg)
		},
	})
}

// RepeatableRead is the configuration mutant "postgres-repeatable-read":
// the correct statements on sessions at REPEATABLE READ, as a database
// whose default_transaction_isolation says so, or a pool configured so,
// runs them. Under it ON CONFLICT DO UPDATE does not act on the latest row
// version: a race's losers get serialization failures (40001), declared
// not applied (safe), where the decision table owes them 409 (the
// availability checker's finding, a kill in strict mode).
const RepeatableRead = "postgres-repeatable-read"

// AsyncReplication is the configuration mutant "postgres-async-replication"
// of the postgres-replicated backend: the correct statements, committed
// with synchronous_commit = local, so a commit is acknowledged once it is
// on the primary's disk, before the standby has it (Postgres's default
// when synchronous_standby_names is empty). A failover to the standby
// then forgets acknowledged claims and answers. The correct replicated
// store commits with the server's setting (the harness's primary has
// synchronous_standby_names = '*' and synchronous_commit = on): a commit
// returns only once the standby has flushed it.
const AsyncReplication = "postgres-async-replication"

// LateAfter is how long a replicated store's claim may take and still be
// handed out: three quarters of the LockTTL, which leaves the owner a
// quarter for its work before a taker-over may come.
func LateAfter(lockTTL time.Duration) time.Duration { return lockTTL * 3 / 4 }

// NewReplicated opens the store of the postgres-replicated backend at dsn
// (the harness's router to the current primary). Its variants are correct
// (synchronous replication) and AsyncReplication.
//
// The correct variant never cancels a statement whose call timed out: it
// drops the connection instead. A cancel request reaching a commit that
// waits for its synchronous standby makes Postgres stop waiting and the
// commit visible on the primary alone ("the transaction has already
// committed locally, but might not have been replicated to the standby"):
// other clients could then read a claim that a failover loses. A dropped
// connection leaves the commit waiting, invisible, until the standby has
// it or the primary dies.
//
// Its Begins that decide by reading alone (a replay, 409, 422) wait for the
// standby to have what they read before they answer (Store.syncReads): a
// read-only replay of a save still waiting for the standby, lost by a
// failover, let the key be claimed and the work run again (the demo of
// postgres-async-replication, run on this store).
//
// Both variants refuse a claim that took three quarters of its LockTTL
// or more to commit (stores.ErrLateClaim): its lease was taken when the statement
// ran, before the wait for the standby, and may be gone by the time the
// owner hears of it.
func NewReplicated(ctx context.Context, dsn string, cfg stores.Config) (*Store, error) {
	v := cfg.Variant
	if v == "" {
		v = stores.Correct
	}
	if v != stores.Correct && v != AsyncReplication {
		return nil, fmt.Errorf("postgres-replicated: unknown variant %q (known: %s, %s)", v, stores.Correct, AsyncReplication)
	}
	st, err := open(ctx, dsn, cfg, func(pcfg *pgxpool.Config) {
		if v == AsyncReplication {
			pcfg.ConnConfig.RuntimeParams["synchronous_commit"] = "local"
			return
		}
		pcfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
		}
	})
	if err != nil {
		return nil, err
	}
	st.lateAfter = LateAfter(cfg.LockTTL)
	st.syncReads = v == stores.Correct
	return st, nil
}

// Variant is the name of the variant the store runs.
func (s *Store) Variant() string { return s.variant }

// Complete saves the response and marks the key done, in one statement
// fenced on status and token; no row changed is ErrFenced.
func (s *Store) Complete(ctx context.Context, key stores.KeyRef, token stores.Token, resp stores.Response) error {
	if err := stores.ValidateKey(key); err != nil {
		return err
	}
	key = stores.StoredKey(s.variant, key)
	args := []any{raw(key.Tenant), raw(key.Key), string(token), resp.Status, raw(resp.Body)}
	tag, err := s.exec(ctx, s.sql.complete, args...)
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.complete, args, "error: %v", err)
		return callErr(ctx, "complete "+quote(key), err)
	}
	faults.TraceBoundf(ctx, s.sql.complete, args, "%d row(s) changed", tag.RowsAffected())
	if tag.RowsAffected() == 0 {
		return stores.ErrFenced
	}
	return nil
}

// Release deletes the claim, in one statement fenced on status and token;
// no row deleted is ErrFenced (the key is left alone).
func (s *Store) Release(ctx context.Context, key stores.KeyRef, token stores.Token) error {
	if err := stores.ValidateKey(key); err != nil {
		return err
	}
	key = stores.StoredKey(s.variant, key)
	args := []any{raw(key.Tenant), raw(key.Key), string(token)}
	tag, err := s.exec(ctx, s.sql.release, args...)
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.release, args, "error: %v", err)
		return callErr(ctx, "release "+quote(key), err)
	}
	faults.TraceBoundf(ctx, s.sql.release, args, "%d row(s) changed", tag.RowsAffected())
	if tag.RowsAffected() == 0 {
		return stores.ErrFenced
	}
	return nil
}

// Prune deletes the keys first claimed at least Retention ago by the
// server's clock (now is ignored) and returns how many it deleted.
func (s *Store) Prune(ctx context.Context, _ time.Time) (int, error) {
	args := []any{s.stmts.keep(s.cfg)}
	tag, err := s.exec(ctx, s.sql.prune, args...)
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.prune, args, "error: %v", err)
		return 0, callErr(ctx, "prune", err)
	}
	faults.TraceBoundf(ctx, s.sql.prune, args, "%d row(s) deleted", tag.RowsAffected())
	return int(tag.RowsAffected()), nil
}

// Close lets the store's sessions go (closes its own pool, or releases its
// hold on a shared one); the data stays on the server.
func (s *Store) Close() error {
	s.release()
	return nil
}

// raw passes a string as bytea, never NULL (pgx sends a nil []byte as NULL).
func raw(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// callErr wraps a failed call's error. When the call's context had ended,
// the error wraps ctx.Err() too: the server's answer to the cancel request
// (57014) does not, and callers test for context.DeadlineExceeded.
// Either way the outcome is unknown: the statement may have taken effect,
// unless the server said it rolled back (notApplied).
func callErr(ctx context.Context, call string, err error) error {
	if notApplied(err) {
		err = stores.NotApplied(err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("postgres: %s: %w: %w%s", call, cerr, err, tooManyHint(err))
	}
	return fmt.Errorf("postgres: %s: %w%s", call, err, tooManyHint(err))
}

// tooManyConnections is the SQLSTATE of a session the server refused at
// its start for too many connections (too_many_connections: its
// max_connections, or the role's CONNECTION LIMIT).
const tooManyConnections = "53300"

// tooManyHint says what to do when the server refused a session for too
// many connections (SQLSTATE 53300: its max_connections, or the role's
// CONNECTION LIMIT): the refusal is the
// harness's load on a shared server, not the store's answer, and a user
// reading it at the end of a run should know which flag to turn.
func tooManyHint(err error) string {
	if sqlState(err) != tooManyConnections {
		return ""
	}
	return " (the server refused a session for too many connections, its max_connections or the role's CONNECTION LIMIT: run fewer scenarios at once, a lower --parallel, or raise the limit)"
}

// notApplied reports whether the server answered err because it rolled
// the call's transaction back as a whole: a serialization failure
// (40001, which a session under REPEATABLE READ or SERIALIZABLE gets when
// it loses a race) or a deadlock (40P01, the victim's transaction is
// aborted). Every call here is one transaction (an autocommit statement,
// or Begin's function call), so nothing of it took effect, and the
// caller gets a definite no-op (stores.ErrNotApplied) instead of an
// unknown outcome. A session refused at its start for being past the
// server's max_connections (53300) never sent the call's statement. A
// failure with no server answer (a dropped connection, a timeout) says
// nothing of the kind and stays unknown.
func notApplied(err error) bool {
	switch sqlState(err) {
	case "40001", "40P01", // serialization_failure, deadlock_detected
		tooManyConnections: // refused at the session's start, before any statement
		return true
	}
	return false
}

// quote prints tenant/key for an error message, escaping binary bytes.
func quote(k stores.KeyRef) string { return strconv.Quote(k.String()) }

// roundTrips is the pool's query tracer: it passes the failpoint
// faults.BeforeRoundTrip before every statement, so a harness can
// interleave a Begin made of several statements whichever code sends them.
// It only yields: a crash there is not possible (pgx cannot abort from a
// tracer), and nothing happens without a failpoint handler.
type roundTrips struct{}

// TraceQueryStart passes the failpoint.
func (roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	_ = faults.Hit(ctx, faults.BeforeRoundTrip)
	return ctx
}

// TraceQueryEnd does nothing.
func (roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// ShowRow describes the key's row (stores.RowShower), for a demo. A plain
// SELECT waits for no row lock.
func (s *Store) ShowRow(ctx context.Context, key stores.KeyRef) (string, error) {
	key = stores.StoredKey(s.variant, key)
	var (
		status, token string
		fp, body      []byte
		respStatus    *int32
	)
	err := s.queryRow(ctx, `SELECT status, token, fingerprint, response_status, response_body FROM `+s.table+
		` WHERE tenant = $1 AND key = $2`, raw(key.Tenant), raw(key.Key)).Scan(&status, &token, &fp, &respStatus, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return stores.NoRow, nil
	}
	if err != nil {
		return "", err
	}
	rs := 0
	if respStatus != nil {
		rs = int(*respStatus)
	}
	return stores.RowLine(status, token, string(fp), rs, string(body)), nil
}
