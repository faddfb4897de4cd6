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
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
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
		Name:       "postgres",
		Clock:      stores.ServerClock,
		Lives:      stores.Server,
		Mutants:    Mutants,
		Statements: true,
		// Every statement commits on its own: no row lock outlives a
		// statement, so none is held across a failpoint; the pool
		// (defaultMaxConns) outnumbers an episode's clients.
		WaitsAnnounced: true,
		Open: func(ctx context.Context, dsn string, cfg stores.Config) (stores.Store, error) {
			return New(ctx, dsn, cfg)
		},
	})
	stores.Register(stores.Backend{
		Name:       "postgres-replicated",
		Clock:      stores.ServerClock,
		Lives:      stores.Server,
		Replicated: "postgres",
		Mutants:    stores.MutantsOn("postgres-replicated"),
		Open: func(ctx context.Context, dsn string, cfg stores.Config) (stores.Store, error) {
			return NewReplicated(ctx, dsn, cfg)
		},
	})
}

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
	// lateAfter, when set, is how long a claim may take to commit and
	// still be handed out (the replicated store: see stores.ErrLateClaim).
	lateAfter time.Duration
	// syncReads: a Begin that did not claim (replay, in flight, mismatch:
	// it decided on a row someone else committed) answers only once the
	// synchronous standby has what it read (the correct replicated store).
	syncReads bool
	// plainBegin: the sessions could not make Begin's function (no
	// TEMPORARY privilege), so Begin sends replaySQL and beginSQL itself.
	plainBegin atomic.Bool
}

// New connects to the Postgres server at dsn (a URL or key=value
// connection string, as pgx accepts), creates the schema if missing, and
// returns a store of cfg.Variant. The context bounds the connecting and the
// schema creation only.
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
	// The statements rely on READ COMMITTED: ON CONFLICT DO UPDATE acts on
	// the latest row version there, while under REPEATABLE READ or
	// SERIALIZABLE the loser of a race gets a serialization error.
	rp["default_transaction_isolation"] = "read committed"
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
	pcfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace}
	}
	schemaID := pgx.Identifier{schema}.Sanitize()
	tableID := pgx.Identifier{schema, "idempotency_keys"}.Sanitize()
	st := &Store{cfg: cfg, variant: v, stmts: stmts, sql: stmts.render(schemaID, tableID, cfg), table: tableID}
	pcfg.AfterConnect = st.installBegin
	if configure != nil {
		configure(pcfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := ensureSchema(ctx, pool, schemaID, tableID); err != nil {
		pool.Close()
		return nil, err
	}
	st.pool = pool
	return st, nil
}

// installBegin makes Begin's function (beginFuncSQL) in a new session,
// before the pool hands the connection out. A role without the TEMPORARY
// privilege on the database cannot: the store then sends replaySQL and
// beginSQL itself (plainBegin), the same decisions at a claim's cost of a
// second round trip. Any other error fails the connection, and
// so the call that needed it (or New, whose schema lookup is the first).
func (s *Store) installBegin(ctx context.Context, c *pgx.Conn) error {
	// Not a round trip of any call: the caller's context carries its
	// failpoints (roundTrips would announce this statement as one), so the
	// statement runs on a context of its own that ends with the caller's.
	own, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	_, err := c.Exec(own, s.sql.beginFunc)
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
		return fmt.Errorf("postgres: look up table %s: %w", tableID, err)
	}
	if exists { // the common case, and needs no CREATE privilege
		return nil
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: create schema %s: %w", schemaID, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, schemaLockKey); err != nil {
		return fmt.Errorf("postgres: create schema %s: lock: %w", schemaID, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, schemaLockKey); err != nil {
			conn.Hijack().Close(uctx) // the lock goes with the session
		}
	}()
	ddl := strings.NewReplacer("{s}", schemaID, "{t}", tableID).Replace(schemaSQL)
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, ddl)
		return err
	}); err != nil {
		return fmt.Errorf("postgres: create schema %s: %w", schemaID, err)
	}
	return nil
}

// Variant is the name of the variant the store runs.
func (s *Store) Variant() string { return s.variant }

// Begin decides per the decision table. In the correct variant it is one
// round trip, a call of the session's function (beginFuncSQL): a read that
// answers a replay (replaySQL), else an insert that claims a key without
// a row (claimSQL), else one statement that decides on the row there
// (beginSQL); the time it decides with is the server's, returned as
// DecidedAt, and req.Now is ignored. A network error or timeout is
// returned as an error: the claim may or may not have been made.
func (s *Store) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if err := stores.ValidateKey(req.KeyRef); err != nil {
		return stores.Decision{}, err
	}
	req.KeyRef = stores.StoredKey(s.variant, req.KeyRef) // case-folded-key, tenant-blind
	switch s.stmts.split {
	case selectThenInsert:
		return s.beginSelectThenInsert(ctx, req)
	case blindTakeover, staleOverwrite:
		return s.beginTakeoverOnRead(ctx, req)
	}
	if s.lateAfter > 0 {
		return stores.BeginInTime(req.KeyRef, s.lateAfter, func() (stores.Decision, error) { return s.begin(ctx, req) })
	}
	return s.begin(ctx, req)
}

// begin runs Begin's read and, when it has no answer, its decision: in
// one round trip through the session's function, or in two (the read,
// then beginSQL, which claims too) where the sessions could not make it.
func (s *Store) begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	var (
		decision, token string
		status          *int32
		body            []byte
		at              time.Time
	)
	args := []any{raw(req.Tenant), raw(req.Key), raw(req.Fingerprint), s.cfg.LockTTL}
	query := func(q string, args []any) error {
		return s.pool.QueryRow(ctx, q, args...).Scan(&decision, &token, &status, &body, &at)
	}
	var err error
	plain := s.plainBegin.Load()
	if !plain {
		err = query(beginCallSQL, args)
	}
	// A session without the function: the store's sessions may not make
	// one (plainBegin), or a pooler between the store and the server
	// (PgBouncer in transaction mode) ran the call on a server session
	// that did not make it, and nothing ran. The read and beginSQL (which
	// claims too), one round trip each.
	if plain || sqlState(err) == "42883" { // undefined_function
		plain = true
		err = query(s.sql.replay, args[:3])
		if errors.Is(err, pgx.ErrNoRows) {
			faults.TraceBound(ctx, s.sql.replay, args[:3], "no done row with this fingerprint")
			err = query(s.sql.begin, args)
		}
	}
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.begin, args, "error: %v", err)
		return stores.Decision{}, callErr(ctx, "begin "+quote(req.KeyRef), err)
	}
	if decision == "replay" && token == "" { // decided by reading alone
		faults.TraceBound(ctx, s.sql.replay, args[:3], "done, same fingerprint: replay, nothing written")
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
		if _, err := s.pool.Exec(ctx, barrier, bargs...); err != nil {
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
	err = s.pool.QueryRow(ctx, s.sql.read, args...).
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

// beginTakeoverOnRead re-creates two takeover bugs: staleness is judged on
// a read, and the write that follows does not compare-and-set on what was
// read. blind-takeover re-checks only that the row is still in flight, so
// two takers both win; stale-overwrite writes the whole row back, erasing a
// response saved since the read.
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
	args := []any{raw(req.Tenant), raw(req.Key)}
	err = s.pool.QueryRow(ctx, s.sql.blindTakeover, args...).Scan(&token, &at)
	if errors.Is(err, pgx.ErrNoRows) { // gone or done since the read
		faults.TraceBound(ctx, s.sql.blindTakeover, args, "0 rows: no longer in flight")
		return s.begin(ctx, req)
	}
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.blindTakeover, args, "error: %v", err)
		return stores.Decision{}, callErr(ctx, "begin "+quote(req.KeyRef)+": takeover", err)
	}
	faults.TraceBoundf(ctx, s.sql.blindTakeover, args, "1 row: taken over, token %s", faults.ShortToken(token))
	return stores.Decision{Outcome: stores.Claimed, Token: stores.Token(token), Takeover: true, DecidedAt: at}, nil
}

// overwrite upserts a new claim over whatever row is there (overwriteSQL).
func (s *Store) overwrite(ctx context.Context, req stores.Request, createdAt *time.Time, decision string) (stores.Decision, error) {
	var token string
	var at time.Time
	args := []any{raw(req.Tenant), raw(req.Key), raw(req.Fingerprint), createdAt, decision}
	err := s.pool.QueryRow(ctx, s.sql.overwrite, args...).
		Scan(&token, &at)
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.overwrite, args, "error: %v", err)
		return stores.Decision{}, callErr(ctx, "begin "+quote(req.KeyRef)+": upsert", err)
	}
	faults.TraceBoundf(ctx, s.sql.overwrite, args, "1 row: claimed, token %s", faults.ShortToken(token))
	return stores.Decision{Outcome: stores.Claimed, Token: stores.Token(token), Takeover: decision == "takeover", DecidedAt: at}, nil
}

// Complete saves the response and marks the key done, in one statement
// fenced on status and token; no row changed is ErrFenced.
func (s *Store) Complete(ctx context.Context, key stores.KeyRef, token stores.Token, resp stores.Response) error {
	if err := stores.ValidateKey(key); err != nil {
		return err
	}
	key = stores.StoredKey(s.variant, key)
	args := []any{raw(key.Tenant), raw(key.Key), string(token), resp.Status, raw(resp.Body)}
	tag, err := s.pool.Exec(ctx, s.sql.complete, args...)
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
	tag, err := s.pool.Exec(ctx, s.sql.release, args...)
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
	tag, err := s.pool.Exec(ctx, s.sql.prune, args...)
	if err != nil {
		faults.TraceBoundf(ctx, s.sql.prune, args, "error: %v", err)
		return 0, callErr(ctx, "prune", err)
	}
	faults.TraceBoundf(ctx, s.sql.prune, args, "%d row(s) deleted", tag.RowsAffected())
	return int(tag.RowsAffected()), nil
}

// Close closes the pool's connections; the data stays on the server.
func (s *Store) Close() error {
	s.pool.Close()
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
// Either way the outcome is unknown: the statement may have taken effect.
func callErr(ctx context.Context, call string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("postgres: %s: %w: %w", call, cerr, err)
	}
	return fmt.Errorf("postgres: %s: %w", call, err)
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
	err := s.pool.QueryRow(ctx, `SELECT status, token, fingerprint, response_status, response_body FROM `+s.table+
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
