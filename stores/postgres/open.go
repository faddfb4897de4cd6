package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/internal/seen"
)

// DefaultSchema holds the table when Config.Namespace is empty.
const DefaultSchema = "idemcheck"

// defaultMaxConns sizes the pool when the DSN does not (pool_max_conns):
// pgxpool's default, max(4, CPUs), would queue a harness's many clients on
// the client side and distort their timing.
const defaultMaxConns = 16

// cancelGrace is how long a call whose context has ended waits for the
// server to confirm the cancel before dropping the connection.
const cancelGrace = time.Second

// schemaLockKey is the advisory lock that serializes schema creation
// across every idemcheck store on the database.
const schemaLockKey = "idemcheck.schema"

// Store is the Postgres store. It is safe for concurrent use.
type Store struct {
	cfg     stores.Config
	variant string
	stmts   statements
	sql     sqlTexts
	table   string // the quoted schema.table, for ShowRow
	pool    *pgxpool.Pool
	// release lets the store's sessions go (Close): the pool's Close, or
	// the store's hold on a shared pool (sharedSessions).
	release func()
	// slots, on a shared pool, holds a slot per call in flight: no more
	// than defaultMaxConns at once, as a pool of the store's own allows
	// (take); nil on a pool of its own.
	slots chan struct{}
	// lateAfter, when set, is how long a claim may take to commit and
	// still be handed out (the replicated store: see stores.ErrLateClaim).
	lateAfter time.Duration
	// syncReads: a Begin that did not claim (replay, in flight, mismatch:
	// it decided on a row someone else committed) answers only once the
	// synchronous standby has what it read (the correct replicated store).
	syncReads bool
	// sessionFunc: the store may not make Begin's function in its schema
	// and did not find it there, so each session makes its own in pg_temp
	// when it connects (installBegin).
	sessionFunc atomic.Bool
	// plainBegin: the sessions could not make Begin's function either (no
	// TEMPORARY privilege), so Begin sends replaySQL and beginSQL itself.
	plainBegin atomic.Bool
	// seen says which statement Begin sends first, alone: the read for a
	// key seen, the claim for one not (a hint only: see begin).
	seen *seen.Keys
}

// New connects to the Postgres server at dsn (a URL or key=value
// connection string, as pgx accepts), creates the schema if missing, and
// returns a store of cfg.Variant. The context bounds the connecting and the
// schema creation only; while the server refuses sessions for too many
// connections, New waits for one (tooManyPatience).
func New(ctx context.Context, dsn string, cfg stores.Config) (*Store, error) {
	if _, ok := variants[cfg.Variant]; !ok && cfg.Variant != "" {
		return nil, fmt.Errorf("postgres: unknown variant %q", cfg.Variant)
	}
	return open(ctx, dsn, cfg, nil)
}

// open is New for a variant of either backend: the statements are those
// of cfg.Variant (the correct ones for a configuration mutant), and
// configure, if set, adjusts the pool's settings last.
func open(ctx context.Context, dsn string, cfg stores.Config, configure func(*pgxpool.Config)) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v := cfg.Variant
	if v == "" {
		v = stores.Correct
	}
	stmts, ok := variants[v]
	if v == AsyncReplication {
		stmts, ok = variants[stores.Correct], true
	}
	if !ok {
		return nil, fmt.Errorf("postgres: unknown variant %q", v)
	}
	schema := cfg.Namespace
	if schema == "" {
		schema = DefaultSchema
	}
	if len(schema) > 63 { // Postgres would silently truncate the name
		return nil, fmt.Errorf("postgres: namespace %q longer than 63 bytes", schema)
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse DSN: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		pcfg.MaxConns = defaultMaxConns
	}
	rp := pcfg.ConnConfig.RuntimeParams
	// The session settings the store relies on, passed through the
	// statement hook (stores.SettingsStatement) like its SQL: the
	// statements rely on READ COMMITTED (ON CONFLICT DO UPDATE acts on the
	// latest row version there, while under REPEATABLE READ or SERIALIZABLE
	// the loser of a race gets a serialization error), and an answer is
	// given only once its commit is on disk (synchronous_commit off would
	// acknowledge claims and answers that a crash of the server forgets):
	// on, unless the DSN asks for another level, which the store keeps
	// (remote_apply is stronger; a weaker one is the DSN's choice).
	syncCommit := rp["synchronous_commit"]
	if syncCommit == "" {
		syncCommit = "on"
	}
	settings, err := cfg.Settings([]stores.Setting{
		{Name: "default_transaction_isolation", Value: "read committed"},
		{Name: "synchronous_commit", Value: syncCommit},
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	for _, s := range settings {
		rp[s.Name] = s.Value
	}
	if v == RepeatableRead {
		rp["default_transaction_isolation"] = "repeatable read"
	}
	// Plan each prepared statement once: every statement here is a lookup
	// by primary key (or Prune's range on created_at), whose plan does not
	// depend on the values bound. Left to choose, Postgres re-plans
	// Begin's statement (CTEs, an INSERT … ON CONFLICT, subqueries) for
	// every call it judges by custom plans, which made a read-only replay
	// cost about three primary-key reads (pgbench in the container: 15k/s
	// against 45k/s; with one generic plan 31-37k/s). Postgres 12 and
	// later; the store needs 13 (gen_random_uuid).
	if rp["plan_cache_mode"] == "" {
		rp["plan_cache_mode"] = "force_generic_plan"
	}
	if rp["application_name"] == "" {
		rp["application_name"] = "idemcheck"
	}
	// When a call's context ends, ask the server to cancel the statement
	// (pgx's default only drops the connection, and the server then runs
	// the statement anyway once it gets its row lock: a timed-out Begin
	// would claim the key later, unseen, and hold it for LockTTL). The
	// outcome is still unknown to the caller; if the cancel cannot reach
	// the server, the connection is dropped after cancelGrace.
	pcfg.ConnConfig.Tracer = roundTrips{}
	cancelled := &cancelledConns{}
	pcfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return cancelled.watch(c, &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace})
	}
	pcfg.PrepareConn = cancelled.usable
	pcfg.BeforeClose = cancelled.forget
	schemaID := pgx.Identifier{schema}.Sanitize()
	tableID := pgx.Identifier{schema, "idempotency_keys"}.Sanitize()
	st := &Store{cfg: cfg, variant: v, stmts: stmts, sql: stmts.render(schemaID, tableID, cfg), table: tableID, seen: seen.New()}
	pcfg.AfterConnect = st.installBegin
	if configure != nil {
		configure(pcfg)
	}
	if configure == nil && !strings.Contains(dsn, "pool_max_conns") {
		pool, release, err := sharedSessions(ctx, poolKey(dsn, rp), pcfg.Copy(), poolLinger)
		if err != nil {
			return nil, fmt.Errorf("postgres: connect: %w", err)
		}
		st.pool, st.release, st.slots = pool, release, make(chan struct{}, defaultMaxConns)
	} else if err := st.ownSessions(ctx, pcfg); err != nil {
		return nil, err
	}
	if err := waitForSession(ctx, func() error { return ensureSchema(ctx, st.pool, schemaID, tableID) }); err != nil {
		st.release()
		return nil, err
	}
	if err := st.ensureBeginFunc(ctx, pcfg); err != nil {
		st.release()
		return nil, err
	}
	return st, nil
}

// ownSessions gives the store a pool of its own, made from pcfg.
func (s *Store) ownSessions(ctx context.Context, pcfg *pgxpool.Config) error {
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("postgres: connect: %w", err)
	}
	s.pool, s.release, s.slots = pool, pool.Close, nil
	return nil
}

// ensureBeginFunc makes Begin's function in the store's schema unless it
// is there (funcName: a function's name says what it runs). Made once
// per schema and variant, not per session: a session that makes its own
// function writes the catalog twice (the function, then its removal when
// the session ends, each a commit waiting for the disk), which cost a
// new session about 40% more CPU on the server and half as long again
// (pgbench -C in the container: 36 against 26 ms of CPU); and a pooler in
// transaction mode (PgBouncer) hands a call a server session of its
// choosing, which has the schema's function but not another session's.
// A role that may not create in the schema (SQLSTATE 42501) falls back
// to the function each session makes (sessionFunc), and a role that may
// not do that either to two round trips (plainBegin): the same
// decisions.
func (s *Store) ensureBeginFunc(ctx context.Context, pcfg *pgxpool.Config) error {
	var exists, callable bool
	name := s.sql.funcName
	if err := s.pool.QueryRow(ctx, `SELECT f IS NOT NULL, coalesce(has_function_privilege(f, 'EXECUTE'), false)
FROM (SELECT to_regprocedure($1) AS f) AS p`, name+beginFuncArgs).Scan(&exists, &callable); err != nil {
		return fmt.Errorf("postgres: look up Begin's function %s: %w", name, err)
	}
	if callable {
		return nil
	}
	if !exists { // else made by another role, which did not let this one call it
		err := runDDL(ctx, s.pool, s.sql.beginFunc)
		if err == nil {
			return nil
		}
		if sqlState(err) != "42501" { // insufficient_privilege
			return fmt.Errorf("postgres: make Begin's function %s: %w", name, err)
		}
	}
	s.sessionFunc.Store(true)
	// The sessions open so far connected without their function: the
	// store's own pool of new ones (installBegin makes it in each), one of
	// which makes it, or finds it may not (plainBegin), before New returns.
	s.release()
	if err := s.ownSessions(ctx, pcfg.Copy()); err != nil {
		s.release = func() {}
		return err
	}
	return waitForSession(ctx, func() error {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("postgres: connect: %w", err)
		}
		c.Release()
		return nil
	})
}

// beginCall is Begin's round trip: a call of the schema's function, or of
// the one each session makes (sessionFunc).
func (s *Store) beginCall() string {
	if s.sessionFunc.Load() {
		return s.sql.callSession
	}
	return s.sql.callFunc
}

// tooManyPatience is how long New waits for a session while the server
// refuses them for too many connections (SQLSTATE 53300: its
// max_connections, or the role's CONNECTION LIMIT). A run's stores share
// their server, each scenario's store lets its sessions go when the
// scenario ends (to the pool it shares, or closed: sharedSessions), and
// a store opened at a busy moment then gets one:
// failing at once left its scenario undecided (`check --parallel 16` on a
// server of max_connections 60).
const tooManyPatience = time.Minute

// waitForSession runs open until it does not fail for too many
// connections, waiting between tries (from 50 ms, doubling up to 2 s),
// for up to tooManyPatience or until ctx ends; it returns open's last
// error, or the refusal before it if ctx ended that try (the refusal says
// which limit to turn).
func waitForSession(ctx context.Context, open func() error) error {
	deadline := time.Now().Add(tooManyPatience)
	var refused error
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := open()
		if err != nil && refused != nil && ctx.Err() != nil {
			return refused
		}
		if err == nil || sqlState(err) != tooManyConnections || time.Now().Add(wait).After(deadline) {
			return err
		}
		refused = err
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// installBegin makes Begin's function (beginFuncSQL) in a new session,
// before the pool hands the connection out, when the store's schema has
// none (sessionFunc). A role without the TEMPORARY privilege on the
// database cannot: the store then sends replaySQL and beginSQL itself
// (plainBegin), the same decisions at a claim's cost of a second round
// trip. Any other error fails the connection, and so the call that
// needed it.
func (s *Store) installBegin(ctx context.Context, c *pgx.Conn) error {
	if !s.sessionFunc.Load() {
		return nil
	}
	// Not a round trip of any call: the caller's context carries its
	// failpoints (roundTrips would announce this statement as one), so the
	// statement runs on a context of its own that ends with the caller's.
	own, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	_, err := c.Exec(own, s.sql.sessionFunc)
	if sqlState(err) == "42501" { // insufficient_privilege
		s.plainBegin.Store(true)
		return nil
	}
	if err != nil {
		return fmt.Errorf("postgres: make Begin's function in the session: %w", err)
	}
	return nil
}

// sqlState is the SQLSTATE code of a server's error ("" for any other).
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// ensureSchema creates the schema, table and index unless the table is
// there. Concurrent CREATE … IF NOT EXISTS can fail in Postgres (both
// sessions see no entry, one loses on the catalog's unique index with
// 23505 or 42P07), so creators take an advisory lock first and run the DDL
// in one transaction: all of it or none. The lock is the session's, taken
// before that transaction begins: a session reads the catalog changes
// others committed (their invalidation messages) when a transaction starts
// or a table is locked, not when an advisory lock is granted, so a
// transaction that began before its wait for the lock could still trust a
// cached "no such schema" from before it, and create the schema again
// beside the winner's (seen with 8 stores opening at once).
func ensureSchema(ctx context.Context, pool *pgxpool.Pool, schemaID, tableID string) error {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, tableID).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: look up table %s: %w%s", tableID, err, tooManyHint(err))
	}
	if exists { // the common case, and needs no CREATE privilege
		return nil
	}
	if err := runDDL(ctx, pool, strings.NewReplacer("{s}", schemaID, "{t}", tableID).Replace(schemaSQL)); err != nil {
		return fmt.Errorf("postgres: create schema %s: %w", schemaID, err)
	}
	return nil
}

// runDDL runs ddl in one transaction on one session of the pool, while
// that session holds the advisory lock that serializes every idemcheck
// store's DDL on the database (taken before the transaction begins: see
// ensureSchema). The transaction commits as durably as the server
// allows, whatever the session's synchronous_commit: on a replicated
// server with a synchronous standby it waits for the standby. A store set
// up to lose acknowledged claims (postgres-async-replication, a
// mutate-weakened setting) must not lose its table or its function: a
// failover soon after the open, on a loaded machine, once left the
// standby without the table, and every call after the failover failed.
func runDDL(ctx context.Context, pool *pgxpool.Pool, ddl string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, schemaLockKey); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, schemaLockKey); err != nil {
			conn.Hijack().Close(uctx) // the lock goes with the session
		}
	}()
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ddl)
		return err
	})
}

// cancelledConns are the sessions a cancel request was sent on (a call's
// context ended while its statement ran). A cancel request is delivered
// to the session's backend by the server, in its own time: pgx waits
// 100 ms after sending it, but on a loaded machine it came later, and
// cancelled the next call on the same session, a call whose own context
// was alive ("canceling statement due to user request", SQLSTATE 57014,
// on a Begin owed a 409: a correct store failed --strict-availability at
// --parallel 32 on 2 cores). Such a session is closed when a call next
// asks the pool for one (usable), never handed to it. (Not when it is
// released: a pool with an AfterRelease hook releases every session in a
// goroutine, and the next call, not finding it back yet, opens another,
// past a small connection limit.)
type cancelledConns struct{ m sync.Map } // *pgconn.PgConn → struct{}

// watch wraps h, the handler of c's context watcher, to note c when a
// cancel request is sent on it.
func (cc *cancelledConns) watch(c *pgconn.PgConn, h ctxwatch.Handler) ctxwatch.Handler {
	return noteCancel{h, func() { cc.m.Store(c, struct{}{}) }}
}

// usable is the pool's PrepareConn: false (close the session, and take
// another) for one a cancel request was sent on.
func (cc *cancelledConns) usable(_ context.Context, c *pgx.Conn) (bool, error) {
	_, cancelled := cc.m.LoadAndDelete(c.PgConn())
	return !cancelled, nil
}

// forget is the pool's BeforeClose: a closed session needs no note.
func (cc *cancelledConns) forget(c *pgx.Conn) { cc.m.Delete(c.PgConn()) }

// noteCancel is a context watcher's handler that calls note before
// handing a cancel on.
type noteCancel struct {
	ctxwatch.Handler
	note func()
}

// HandleCancel notes the cancel, then sends it.
func (n noteCancel) HandleCancel(ctx context.Context) {
	n.note()
	n.Handler.HandleCancel(ctx)
}
