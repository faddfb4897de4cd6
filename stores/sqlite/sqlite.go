// Package sqlite is the embedded idempotency-key store: the decision table of
// docs/DESIGN.md §1 in one SQLite file, through database/sql and modernc.org/sqlite
// (pure Go, no cgo), taking time from the caller's clock. Its mutants sit
// beside the correct code: statements.go holds the SQL, each mutant replacing
// one statement of the correct set; begin.go holds the flows.
//
// Design:
//   - Every connection of the pool is configured by the DSN, so none can miss
//     a setting: busy_timeout(5000), journal_mode(WAL), synchronous(FULL), and
//     _txlock=immediate, which makes every database/sql transaction a BEGIN
//     IMMEDIATE: it takes the write lock before reading (waiting under the
//     busy timeout), so two writers can never both read and then both write.
//     A deferred transaction would read first and upgrade to write later; in
//     WAL mode that upgrade fails at once with SQLITE_BUSY_SNAPSHOT if another
//     connection committed since the read, without the busy timeout helping.
//   - Begin is one transaction: INSERT … ON CONFLICT DO NOTHING, and only on a
//     conflict the row, read in the same transaction, then the decision, then
//     a compare-and-set takeover on the token read when the claim is stale.
//     It runs as BEGIN IMMEDIATE … COMMIT statements on a connection the
//     Store keeps for its writes (see inTx), not as a database/sql Tx.
//     Complete and Release are single fenced statements; Prune deletes in
//     batches of single statements.
//   - Writers queue inside the Store (first come, first served) so that one
//     connection per Store contends for the file's write lock: SQLite's busy
//     handler polls rather than queues, and starved a writer for the whole
//     busy timeout when dozens of connections polled. Between Stores (and
//     processes) the lock is still SQLite's poll, so under sustained
//     contention one process can wait long. A write that cannot get the lock
//     within BusyTimeout fails with ErrBusy, having written nothing.
//   - Durability: WAL with synchronous=FULL fsyncs the WAL at every commit, so
//     a Begin that returned Claimed survives the process being killed (-9)
//     and the machine losing power. synchronous=NORMAL would also survive
//     kill -9 (a commit is in the OS page cache once write() returns), but a
//     power cut could forget the last claims: a retry would run the work again.
//   - Time: Request.Now as int64 Unix nanoseconds. Nanoseconds keep every bit
//     of a Go time.Time between 1678 and 2262, so staleness and retention are
//     decided exactly as the reference store decides them, with no rounding at
//     the LockTTL edge; times outside that range are refused with an error.
//   - Tenant, key, fingerprint and response body are BLOBs: any byte string
//     round-trips and compares by its bytes.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/internal/seen"
)

func init() {
	stores.Register(stores.Backend{
		Name:       "sqlite",
		CallWall:   2 * time.Millisecond,
		Clock:      stores.CallerClock,
		Lives:      stores.File,
		Failpoints: []string{faults.BeginBeforeCommit},
		Mutants:    Mutants,
		Statements: true,
		Equivalent: Equivalent,
		// A writer waits for the Store's writer turn through faults.Wait
		// (see write); readers never wait (WAL).
		WaitsAnnounced: true,
		Open: func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
			s, err := New(ctx, addr, cfg)
			if err != nil {
				return nil, err // not a typed nil inside the interface
			}
			return s, nil
		},
	})
}

// BusyTimeout bounds how long a write waits for the write lock: first for the
// Store's own writer ahead of it, then (SQLite's busy_timeout) for another
// connection's, in this process or another. Past it the write fails with
// ErrBusy.
const BusyTimeout = 5 * time.Second

// idleConns is how many connections the pool keeps open between calls:
// the writer's and concurrent replays' (see replayOnRead).
const idleConns = 16

// maxConns bounds the pool's open connections. Each holds file
// descriptors (the database, its WAL and shared memory) and a page cache,
// and database/sql opens one per concurrent call by default: a check of
// 1659 keys sent thousands of calls at once, the process reached its limit
// of open files, and a correct store answered "unable to open database
// file" to every call past it. A call beyond the bound waits for a
// connection (writes take turns on one writer anyway).
const maxConns = 4 * idleConns

// pruneBatch bounds how many rows one DELETE of Prune removes, so a large
// prune does not hold the write lock for longer than the busy timeout.
const pruneBatch = 1000

// Store is an idempotency-key store in one SQLite file. It is safe for
// concurrent use, and many Stores, in this process or others, may share the
// file.
type Store struct {
	db      *sql.DB
	cfg     stores.Config
	variant string
	sql     statements
	// writer admits one write (transaction or statement) of this Store at a
	// time; see write.
	writer      chan struct{}
	busyTimeout time.Duration
	// begin opens Begin's write transaction: BEGIN IMMEDIATE, from the
	// settings (see settings).
	begin string
	// seen says which order Begin tries its steps in (a hint only).
	seen *seen.Keys
	// processLock is the process-lock mutant's lock in process memory.
	processLock sync.Mutex
	// replayStmt is sql.replay, prepared: Begin's read outside the write
	// transaction (replayOnRead).
	replayStmt *sql.Stmt
	// replayParams are replayStmt's parameters in the order they bind:
	// it is sql.replay with each :name made an anonymous ? (positional).
	replayParams []replayParam
	// lockTTLArg is replayStmt's :lock_ttl parameter, made once.
	lockTTLArg any
	// wtx is the connection of Begin's write transactions, with the claim
	// prepared on it (nil until the first, or after it broke); the
	// writer's turn guards it (see inTx); atomic for Close, which does not
	// wait for the turn.
	wtx atomic.Pointer[writeTx]
}

// ErrBusy is wrapped by the error of a write that waited BusyTimeout for the
// write lock (held by another writer of this Store, or another connection
// to the file) without getting it. Nothing was written: it is safe to retry.
var ErrBusy = errors.New("database is locked: no write lock within the busy timeout")

// write waits for this Store's turn to write and returns the function that
// ends it, so that only one connection per Store contends for the file's
// write lock. SQLite's busy handler is a poll with growing sleeps (up to
// 100 ms), not a queue: with dozens of connections polling, one can lose
// every poll for the whole busy timeout and fail with SQLITE_BUSY (seen with
// 6 pools x 32 goroutines on one file). Waiting here instead is first come,
// first served (a channel's queue of blocked senders), ends with ctx, and is
// bounded by the busy timeout too, so that a writer stuck inside a
// transaction (paused at a failpoint, say) makes the others fail with
// ErrBusy rather than hang. Between Stores (processes) the poll remains.
func (s *Store) write(ctx context.Context) (done func(), err error) {
	// Before each write transaction, before it waits for the writer's
	// turn: a harness interleaves a caller there (holding nothing), so an
	// operation made of several transactions is interleaved between them.
	if err := faults.Hit(ctx, faults.BeforeRoundTrip); err != nil {
		return nil, err
	}
	for {
		select {
		case s.writer <- struct{}{}:
			return func() { <-s.writer }, nil
		default:
		}
		// Taken: under a scheduler, wait as one of its steps (and try
		// again when let go) rather than block where it cannot see.
		if held, err := faults.Wait(ctx, faults.WaitTurn); err != nil {
			return nil, err
		} else if !held {
			break
		}
	}
	t := time.NewTimer(s.busyTimeout)
	defer t.Stop()
	select {
	case s.writer <- struct{}{}:
		return func() { <-s.writer }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, fmt.Errorf("waited %v for this store's other writer: %w", s.busyTimeout, ErrBusy)
	}
}

// busy marks SQLite's SQLITE_BUSY (the busy timeout ran out) as ErrBusy.
func busy(err error) error {
	if primaryCode(err) == sqlite3.SQLITE_BUSY {
		return fmt.Errorf("%w (%w)", ErrBusy, err)
	}
	return err
}

// primaryCode is the primary result code of a SQLite error (its extended
// code's low byte), or -1 for any other error.
func primaryCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return -1
}

// settings are the connection settings the store relies on, in the
// order they are applied: a writer that waits for another process's
// write (busy_timeout) instead of failing, a log readers read beside
// (journal_mode WAL), a commit on disk before its answer (synchronous
// FULL), and Begin's transaction taking the write lock at its start
// (transaction IMMEDIATE: see the package doc), so that its read and its
// write see one state. They go through the statement hook
// (stores.SettingsStatement) like the statements.
func settings(busyTimeout time.Duration) []stores.Setting {
	return []stores.Setting{
		{Name: "busy_timeout", Value: fmt.Sprint(busyTimeout.Milliseconds())},
		{Name: "journal_mode", Value: "WAL"},
		{Name: "synchronous", Value: "FULL"},
		{Name: "transaction", Value: "IMMEDIATE"},
	}
}

// dsn configures every connection the pool opens: the settings are
// per-connection in SQLite (busy_timeout, synchronous) or must be seen by the
// first one (journal_mode), so they belong in the DSN rather than in one Exec.
func dsn(path string, ss []stores.Setting) string {
	q := url.Values{}
	for _, s := range ss {
		if s.Name == "transaction" {
			continue // Begin's own BEGIN (Store.begin), not the connection's
		}
		q.Add("_pragma", fmt.Sprintf("%s(%s)", s.Name, s.Value))
	}
	q.Set("_txlock", "immediate") // database/sql's transactions (the table's creation)
	// A file: URI, so that a path holding '?', '#' or '%' stays a path.
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()} // file:///abs/path?…
	return u.String()
}

// New opens (creating if needed) the store in the SQLite file at path and
// makes its table if missing; it is safe to do from many processes at once.
func New(ctx context.Context, path string, cfg stores.Config) (*Store, error) {
	return newStore(ctx, path, cfg, BusyTimeout)
}

// newStore is New with another busy timeout (tests shorten it).
func newStore(ctx context.Context, path string, cfg stores.Config, busyTimeout time.Duration) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	v := cfg.Variant
	if v == "" {
		v = stores.Correct
	}
	if v != stores.Correct && !slices.Contains(Mutants, v) {
		return nil, fmt.Errorf("sqlite: unknown variant %q (known: %s, %v)", v, stores.Correct, Mutants)
	}
	abs, err := checkPath(path)
	if err != nil {
		return nil, err
	}
	ss, err := cfg.Settings(settings(busyTimeout))
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(abs, ss))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	// Replays read beside the writer, on connections of their own
	// (replayOnRead): keep that many open rather than database/sql's two
	// idle ones, or every burst of concurrent readers opens (and configures)
	// new connections and closes them again.
	db.SetMaxIdleConns(idleConns)
	db.SetMaxOpenConns(maxConns)
	s := &Store{db: db, cfg: cfg, variant: v, sql: statementsFor(v).hooked(cfg), writer: make(chan struct{}, 1), busyTimeout: busyTimeout, seen: seen.New(),
		begin: "BEGIN " + stores.SettingValue(ss, "transaction"), lockTTLArg: cfg.LockTTL.Nanoseconds()}
	if err := s.initWaiting(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	text, names := positional(s.sql.replay)
	if s.replayParams, err = replayParams(names); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	if s.replayStmt, err = db.PrepareContext(ctx, text); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: prepare: %w", abs, describe(err))
	}
	// The claim is prepared here too, though it runs on the writer's
	// connection (prepared there when first needed): a statement the
	// hook broke fails New, not the first Begin. The writer's connection
	// is not taken now: the pool's one idle connection would go with it,
	// and the first replay read would open (and configure) another.
	claim, err := db.PrepareContext(ctx, s.sql.claim)
	if err != nil {
		s.replayStmt.Close()
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: prepare: %w", abs, describe(err))
	}
	claim.Close()
	return s, nil
}

// checkPath turns the usual reasons a file cannot be opened into errors that
// name them (SQLite says only "unable to open database file").
func checkPath(path string) (string, error) {
	if path == "" || path == ":memory:" {
		return "", fmt.Errorf("sqlite: need a database file path, got %q (an in-memory database is private to one connection)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: path %q: %w", path, err)
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return "", fmt.Errorf("sqlite: open %s: is a directory, not a database file", abs)
	}
	dir := filepath.Dir(abs)
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("sqlite: open %s: directory %s: %w", abs, dir, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("sqlite: open %s: %s is not a directory", abs, dir)
	}
	return abs, nil
}

// initWaiting runs init until it gets past SQLITE_BUSY, for up to the busy
// timeout. The busy timeout alone does not cover opening a new file from
// several processes at once: each connection's journal_mode(WAL) reads the
// file's header and then upgrades to write it, and SQLite fails that upgrade
// at once with SQLITE_BUSY, without its busy handler, when another
// connection holds the write lock (waiting could deadlock two upgraders).
// Seen as New failing at once in 3 of 40 rounds of 8 processes opening one
// new file. Once one switch has committed the file stays in WAL mode, and the
// setting only reads it, so a retry gets past; the pool drops the failed
// connection.
func (s *Store) initWaiting(ctx context.Context) error {
	deadline := time.Now().Add(s.busyTimeout)
	pause := time.Millisecond
	for {
		err := s.init(ctx)
		if primaryCode(err) != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// init creates the table (idempotently: every process may race to do it) and
// checks that an existing one is ours.
func (s *Store) init(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: one creator at a time
	if err != nil {
		return describe(busy(err))
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, createTable); err != nil {
		return fmt.Errorf("create table: %w", describe(err))
	}
	if rows, err := tx.QueryContext(ctx, probe); err != nil {
		return fmt.Errorf("table idempotency_keys exists with another layout: %w", err)
	} else if err := rows.Close(); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, createIndex); err != nil {
		return fmt.Errorf("create index: %w", describe(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: %w", describe(err))
	}
	return nil
}

// describe adds SQLite's name for the error code to the driver's message,
// which for open failures is easy to misread.
func describe(err error) error {
	if name, ok := sqlite.ErrorCodeString[primaryCode(err)]; ok {
		return fmt.Errorf("%w [%s]", err, name)
	}
	return err
}

// Variant names the variant the store runs: "correct" or a mutant.
func (s *Store) Variant() string { return s.variant }

// The range of times a Unix-nanosecond int64 holds.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// unixNano is t in the store's time unit, or an error if it does not fit.
func unixNano(t time.Time) (int64, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, fmt.Errorf("sqlite: time %v is outside the storable range (%v to %v); is Now set?",
			t, minTime.UTC(), maxTime.UTC())
	}
	return t.UnixNano(), nil
}

// blob is s as a non-nil []byte, which the driver binds as a BLOB (a nil
// slice would be bound as NULL, a string as TEXT).
func blob(s string) []byte {
	b := make([]byte, len(s))
	copy(b, s)
	return b
}

// args are the named parameters every statement may use: the key, the
// configuration, and the step's own (a statement ignores those it does not
// name).
func (s *Store) args(key stores.KeyRef, extra ...any) []any {
	key = stores.StoredKey(s.variant, key) // case-folded-key, tenant-blind
	return append([]any{
		sql.Named("tenant", blob(key.Tenant)),
		sql.Named("key", blob(key.Key)),
		sql.Named("lock_ttl", s.cfg.LockTTL.Nanoseconds()),
		sql.Named("retention", s.cfg.Retention.Nanoseconds()),
	}, extra...)
}

// Complete saves the response and marks the key done, in one statement
// fenced by the token (status in flight and token unchanged); 0 rows changed
// means the claim is no longer the caller's: ErrFenced.
func (s *Store) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	if err := stores.ValidateKey(key); err != nil {
		return err
	}
	return s.fencedWrite(ctx, "complete", s.sql.complete, s.args(key,
		sql.Named("token", string(tok)),
		sql.Named("resp_status", int64(resp.Status)),
		sql.Named("resp_body", blob(resp.Body)))...)
}

// Release deletes the claim, in one statement fenced by the token; 0 rows
// changed means the claim is not the caller's any more: ErrFenced, and the
// row is left alone.
func (s *Store) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	if err := stores.ValidateKey(key); err != nil {
		return err
	}
	return s.fencedWrite(ctx, "release", s.sql.release, s.args(key, sql.Named("token", string(tok)))...)
}

// fencedWrite runs one fenced write: 0 rows changed is ErrFenced.
func (s *Store) fencedWrite(ctx context.Context, op, stmt string, args ...any) error {
	n, err := s.exec(ctx, stmt, args...)
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if n == 0 {
		return stores.ErrFenced
	}
	return nil
}

// exec runs one write statement in its own (autocommit) transaction, in this
// Store's turn to write, and says how many rows it changed.
func (s *Store) exec(ctx context.Context, stmt string, args ...any) (int64, error) {
	done, err := s.write(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	res, err := s.db.ExecContext(ctx, stmt, args...)
	if err != nil {
		faults.TraceBoundf(ctx, stmt, args, "error: %v", err)
		return 0, busy(err)
	}
	n, err := res.RowsAffected()
	faults.TraceBoundf(ctx, stmt, args, "%d row(s) changed", n)
	return n, err
}

// Prune deletes the keys created at or before now - Retention (the caller's
// clock), in batches so that no statement holds the write lock for long, and
// says how many it deleted. The short-retention mutant keeps keys only for
// LockTTL.
func (s *Store) Prune(ctx context.Context, now time.Time) (int, error) {
	ns, err := unixNano(now)
	if err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := s.exec(ctx, s.sql.prune, s.args(stores.KeyRef{},
			sql.Named("now", ns), sql.Named("batch", int64(pruneBatch)))...)
		if err != nil {
			return total, fmt.Errorf("sqlite: prune: %w", err)
		}
		total += int(n)
		if n < pruneBatch {
			return total, nil
		}
	}
}

// Close closes the store's connections; the file stays.
func (s *Store) Close() error {
	s.replayStmt.Close()
	if tx := s.wtx.Swap(nil); tx != nil {
		tx.claim.Close()
		tx.Close()
	}
	return s.db.Close()
}

// showRow reads a key's row for a demo.
const showRow = `SELECT status, token, fingerprint, coalesce(resp_status, 0), coalesce(resp_body, x'') FROM idempotency_keys WHERE tenant = :tenant AND key = :key`

// ShowRow describes the key's row (stores.RowShower), for a demo. A read
// in WAL mode waits for no writer.
func (s *Store) ShowRow(ctx context.Context, key stores.KeyRef) (string, error) {
	var (
		status, token string
		fp, body      []byte
		respStatus    int
	)
	err := s.db.QueryRowContext(ctx, showRow, s.args(key)...).Scan(&status, &token, &fp, &respStatus, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return stores.NoRow, nil
	}
	if err != nil {
		return "", err
	}
	return stores.RowLine(status, token, string(fp), respStatus, string(body)), nil
}
