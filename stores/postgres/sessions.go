package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemcheck/idemcheck/stores"
)

// The stores of one process that connect alike share their sessions: a
// run opens a store per scenario (each on a schema of its own), and each
// store with a pool of its own forked its server sessions anew, which on
// the project's machine cost a run more CPU than the calls it judged (a
// default `check` on one server: 257-264 sessions, 23.5-25.6 CPU-seconds
// busy; with the sessions shared, 118-123 and 14.0-16.5). A session
// carries nothing of a store between calls: every statement names its
// schema, every call is one transaction, and the settings a store
// relies on are the session's startup parameters, part of what makes
// stores connect alike (poolKey).
//
// Stores share only a pool they could have made alike: none whose DSN
// sizes its pool (pool_max_conns: the caller asked for that many
// sessions for that store), none with settings of its own (configure:
// the replicated store's), none whose sessions make Begin's function
// themselves (Store.sessionFunc: a session made for another store would
// not have it).

// sharedMaxConns bounds the sessions of a shared pool: the stores that
// share it each still hold at most defaultMaxConns at once (Store.slots),
// as with a pool of their own, and together no more than this, below the
// default max_connections (100) of a server.
const sharedMaxConns = 64

// sharedLifetime is how long a session of a shared pool serves before the
// pool replaces it: a session keeps what it prepared and compiled for
// every store it served (statements, Begin's function of each schema),
// and a long soak's stores are many.
const sharedLifetime = 2 * time.Minute

// poolLinger is how long a shared pool keeps its sessions once no store
// uses it: a run's stores close between its phases and the next opens
// right after.
const poolLinger = 5 * time.Second

// sharedPool is one pool and the count of open stores on it.
type sharedPool struct {
	pool  *pgxpool.Pool
	refs  int
	timer *time.Timer // closes the pool, set while refs is 0
}

// pools are the shared pools, by poolKey.
var pools = struct {
	sync.Mutex
	m map[string]*sharedPool
}{m: map[string]*sharedPool{}}

// poolKey is what makes two stores' sessions alike: the DSN and the
// startup parameters the store adds to it.
func poolKey(dsn string, params map[string]string) string {
	var b strings.Builder
	b.WriteString(dsn)
	for _, k := range slices.Sorted(maps.Keys(params)) {
		fmt.Fprintf(&b, "\x00%s=%s", k, params[k])
	}
	return b.String()
}

// sharedSessions returns the shared pool of key, made from pcfg if there
// is none, and the release a store calls when it closes (the pool closes
// linger after its last store's release: poolLinger).
func sharedSessions(ctx context.Context, key string, pcfg *pgxpool.Config, linger time.Duration) (*pgxpool.Pool, func(), error) {
	pools.Lock()
	defer pools.Unlock()
	sp := pools.m[key]
	if sp == nil {
		pcfg.MaxConns, pcfg.MaxConnLifetime = sharedMaxConns, sharedLifetime
		pcfg.AfterConnect = nil // see sessionFunc
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, nil, err
		}
		sp = &sharedPool{pool: pool}
		pools.m[key] = sp
	}
	if sp.timer != nil {
		sp.timer.Stop()
		sp.timer = nil
	}
	sp.refs++
	var once sync.Once
	return sp.pool, func() { once.Do(func() { releaseShared(key, sp, linger) }) }, nil
}

// releaseShared drops a store's hold on sp, and closes sp's sessions
// linger after the last one, unless a store took it again by then.
func releaseShared(key string, sp *sharedPool, linger time.Duration) {
	pools.Lock()
	defer pools.Unlock()
	sp.refs--
	if sp.refs > 0 {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(linger, func() {
		pools.Lock()
		if sp.timer != t { // taken again since (a later release set a timer of its own)
			pools.Unlock()
			return
		}
		delete(pools.m, key)
		pools.Unlock()
		sp.pool.Close()
	})
	sp.timer = t
}

// take holds one of the store's slots (a store on a shared pool has
// defaultMaxConns of them: no more sessions at once than a pool of its
// own would give it). A call whose context ends before it gets one sent
// nothing: stores.ErrNotApplied.
func (s *Store) take(ctx context.Context) error {
	if s.slots == nil {
		return nil
	}
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return stores.NotApplied(fmt.Errorf("no session of the store's %d came free: %w", cap(s.slots), ctx.Err()))
	}
}

// give frees the slot take held.
func (s *Store) give() {
	if s.slots != nil {
		<-s.slots
	}
}

// exec is the pool's Exec, in one of the store's slots.
func (s *Store) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := s.take(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	defer s.give()
	return s.pool.Exec(ctx, sql, args...)
}

// queryRow is the pool's QueryRow, in one of the store's slots until its
// Scan, which the caller must call (as pgx's row holds its session until
// then).
func (s *Store) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := s.take(ctx); err != nil {
		return errRow{err}
	}
	return slotRow{Row: s.pool.QueryRow(ctx, sql, args...), give: s.give}
}

// slotRow gives its store's slot back once scanned.
type slotRow struct {
	pgx.Row
	give func()
}

// Scan scans the row and gives the slot back.
func (r slotRow) Scan(dest ...any) error {
	defer r.give()
	return r.Row.Scan(dest...)
}

// errRow is a row that was never asked for.
type errRow struct{ err error }

// Scan returns the error.
func (r errRow) Scan(...any) error { return r.err }
