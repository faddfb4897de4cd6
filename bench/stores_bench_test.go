// Package bench measures every store operation against a raw baseline of
// the same shape on the same server and driver, in the same run: the
// ratio store/raw says how far a store is from the physical cost of one
// round trip, and stays meaningful on a noisy shared machine where the
// absolute figures do not. `make bench` runs the benchmarks and prints the
// ratios (cmd/benchratio); the output is also benchstat's input format.
//
// Names are BenchmarkStores/<backend>/<op>/g=<goroutines>. The store's ops
// are claim, complete, takeover (writes) and replay, in-flight, mismatch
// (decisions on an existing key); the raw ops are raw-write (a
// single-statement upsert of a row of the same table shape, SET NX on
// Redis, an INSERT in the same SQLite file, a map store under a mutex in
// memory), raw-read (a primary-key read of a row the store wrote, HMGET of a
// hash of the same fields on Redis) and raw-ping (SELECT 1, PING).
package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	_ "github.com/idemcheck/idemcheck/stores/redis"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// goroutines are the concurrency levels every operation runs at.
var goroutines = []int{1, 8}

// hotKeys is how many existing keys the decision benchmarks cycle over,
// so that 8 goroutines do not all read one row.
const hotKeys = 64

// lockTTL is long enough that no claim of a benchmark goes stale, except
// in the takeover benchmark, whose store has takeoverTTL.
const (
	lockTTL     = time.Hour
	takeoverTTL = 2 * time.Millisecond
	retention   = 24 * time.Hour
)

func TestMain(m *testing.M) {
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	_ = servers.CloseAll(ctx)
	cancel()
	os.Exit(code)
}

// server starts one server of each kind per benchmark binary and shares it.
var (
	serverMu sync.Mutex
	started  = map[servers.Kind]*servers.Server{}
)

func server(b *testing.B, kind servers.Kind) string {
	b.Helper()
	serverMu.Lock()
	defer serverMu.Unlock()
	if s, ok := started[kind]; ok {
		return s.Addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := servers.Start(ctx, kind, servers.Options{Logf: b.Logf})
	if err != nil {
		b.Skipf("%v", err)
	}
	started[kind] = s
	return s.Addr
}

// namespaces makes every store of the run its own namespace (schema, key
// prefix) or file.
var namespaces atomic.Int64

// env is one backend under benchmark: how to open a fresh store and run
// the raw baselines beside it.
type env struct {
	name string
	// open returns a fresh store with the given LockTTL and where its data
	// lives (the SQLite file, the Postgres schema, the Redis prefix).
	open func(b *testing.B, ttl time.Duration) (stores.Store, string)
	// raw are the baselines, each a function of the op index.
	raw func(b *testing.B, where string) map[string]op
	// now is the Request.Now a caller-clock store is given (server-clock
	// stores ignore it).
	clock func() time.Time
}

func openStore(b *testing.B, backend, addr string, ttl time.Duration, ns string) stores.Store {
	b.Helper()
	be, err := stores.Lookup(backend)
	if err != nil {
		b.Fatal(err)
	}
	s, err := be.Open(context.Background(), addr, stores.Config{LockTTL: ttl, Retention: retention, Variant: stores.Correct, Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func envs() []env {
	return []env{sqliteEnv(), memoryEnv(), postgresEnv(), redisEnv()}
}

// realClock is the caller clock for the stores that take it.
func realClock() time.Time { return time.Now() }

func sqliteEnv() env {
	return env{
		name:  "sqlite",
		clock: realClock,
		open: func(b *testing.B, ttl time.Duration) (stores.Store, string) {
			path := filepath.Join(b.TempDir(), "bench.db")
			return openStore(b, "sqlite", path, ttl, ""), path
		},
		raw: func(b *testing.B, path string) map[string]op {
			// The store's own settings: WAL, synchronous=FULL, an immediate
			// write transaction (INSERT in autocommit takes the write lock).
			q := url.Values{}
			q.Add("_pragma", "busy_timeout(5000)")
			q.Add("_pragma", "journal_mode(WAL)")
			q.Add("_pragma", "synchronous(FULL)")
			q.Set("_txlock", "immediate")
			dsn := func(path string) string {
				return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
			}
			db, err := sql.Open("sqlite", dsn(path))
			if err != nil {
				b.Fatal(err)
			}
			db.SetMaxIdleConns(16) // as the store's pool
			b.Cleanup(func() { db.Close() })
			// The raw writes go to a file of their own, with the store's
			// table (a store opened there made it) on the same disk. On the
			// store's own file they would contend with the store's writes
			// for SQLite's file lock, two writer queues that no deployment
			// has (the store queues its own writers in process), and the
			// loser sleeps in SQLite's busy handler for 1 ms or more: 5-10
			// commits' time, landing on either side by chance, which made
			// single runs of the claim ratio wander from 0.35 to 1.48.
			wpath := strings.TrimSuffix(path, ".db") + "-raw.db"
			openStore(b, "sqlite", wpath, lockTTL, "")
			wdb, err := sql.Open("sqlite", dsn(wpath))
			if err != nil {
				b.Fatal(err)
			}
			wdb.SetMaxIdleConns(16)
			b.Cleanup(func() { wdb.Close() })
			// One writer at a time, as the store queues its own writers, on
			// one connection kept for them with its INSERT prepared, as the
			// store keeps its writer's connection and statements: the
			// strongest raw write, not one re-parsed through the pool.
			var wmu sync.Mutex
			wconn, err := wdb.Conn(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { wconn.Close() })
			insert, err := wconn.PrepareContext(context.Background(), `INSERT INTO idempotency_keys (tenant, key, fingerprint, status, locked_at, token, created_at)
VALUES (?, ?, ?, 'in_flight', ?, ?, ?) ON CONFLICT (tenant, key) DO NOTHING`)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { insert.Close() })
			// Prepared, as the store prepares its read.
			read, err := db.Prepare(`SELECT status, resp_body FROM idempotency_keys WHERE tenant = ? AND key = ?`)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { read.Close() })
			return map[string]op{
				// A claim's row, in one statement, in the store's own table
				// (its primary key and created_at index), as on Postgres.
				"raw-write": func(ctx context.Context, p string, i int) error {
					wmu.Lock()
					defer wmu.Unlock()
					now := time.Now().UnixNano()
					_, err := insert.ExecContext(ctx, []byte("raw"), []byte(p+strconv.Itoa(i)), []byte(fingerprint), now, "raw-token", now)
					return err
				},
				"raw-read": func(ctx context.Context, p string, i int) error {
					var st string
					var body []byte
					return read.QueryRowContext(ctx, []byte(tenant), []byte(hotKey(i))).Scan(&st, &body)
				},
			}
		},
	}
}

func memoryEnv() env {
	return env{
		name:  "memory",
		clock: realClock,
		open: func(b *testing.B, ttl time.Duration) (stores.Store, string) {
			return openStore(b, "memory", "", ttl, ""), ""
		},
		raw: func(b *testing.B, _ string) map[string]op {
			// A map under a mutex: the least an in-process store can do.
			var mu sync.Mutex
			m := map[stores.KeyRef]stores.Response{}
			for i := range hotKeys {
				m[stores.KeyRef{Tenant: tenant, Key: hotKey(i)}] = stores.Response{Status: 200, Body: "ok"}
			}
			return map[string]op{
				"raw-write": func(_ context.Context, p string, i int) error {
					k := stores.KeyRef{Tenant: tenant, Key: "w" + p + strconv.Itoa(i)}
					mu.Lock()
					if _, ok := m[k]; !ok {
						m[k] = stores.Response{}
					}
					mu.Unlock()
					return nil
				},
				"raw-read": func(_ context.Context, p string, i int) error {
					mu.Lock()
					_ = m[stores.KeyRef{Tenant: tenant, Key: hotKey(i)}]
					mu.Unlock()
					return nil
				},
			}
		},
	}
}

func postgresEnv() env {
	var addr string
	return env{
		name:  "postgres",
		clock: realClock,
		open: func(b *testing.B, ttl time.Duration) (stores.Store, string) {
			if addr == "" {
				addr = server(b, servers.Postgres)
			}
			ns := fmt.Sprintf("bench_%d", namespaces.Add(1))
			return openStore(b, "postgres", addr, ttl, ns), ns
		},
		raw: func(b *testing.B, schema string) map[string]op {
			cfg, err := pgxpool.ParseConfig(addr)
			if err != nil {
				b.Fatal(err)
			}
			cfg.MaxConns = 32 // as many as the store's pool: no goroutine queues for a connection
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(pool.Close)
			table := schema + ".idempotency_keys"
			return map[string]op{
				// A claim's row, in one statement, in the store's own table.
				"raw-write": func(ctx context.Context, p string, i int) error {
					_, err := pool.Exec(ctx, `INSERT INTO `+table+` (tenant, key, fingerprint, status, locked_at, token, created_at, decision)
VALUES ($1, $2, $3, 'in_flight', clock_timestamp(), gen_random_uuid()::text, clock_timestamp(), 'claimed')
ON CONFLICT (tenant, key) DO NOTHING`, []byte("raw"), []byte(p+strconv.Itoa(i)), []byte(fingerprint))
					return err
				},
				// The row a replay returns, by its primary key.
				"raw-read": func(ctx context.Context, p string, i int) error {
					var st string
					var body []byte
					return pool.QueryRow(ctx, `SELECT status, response_body FROM `+table+` WHERE tenant = $1 AND key = $2`,
						[]byte(tenant), []byte(hotKey(i))).Scan(&st, &body)
				},
				"raw-ping": func(ctx context.Context, _ string, _ int) error {
					var one int
					return pool.QueryRow(ctx, `SELECT 1`).Scan(&one)
				},
			}
		},
	}
}

func redisEnv() env {
	var addr string
	return env{
		name:  "redis",
		clock: realClock,
		open: func(b *testing.B, ttl time.Duration) (stores.Store, string) {
			if addr == "" {
				addr = server(b, servers.Redis)
			}
			ns := fmt.Sprintf("bench_%d", namespaces.Add(1))
			return openStore(b, "redis", addr, ttl, ns), ns
		},
		raw: func(b *testing.B, ns string) map[string]op {
			rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32})
			b.Cleanup(func() { rdb.Close() })
			ctx := context.Background()
			// Hashes of the store's fields, read whole by HMGET as Begin does.
			for i := range hotKeys {
				if err := rdb.HSet(ctx, "raw:"+ns+":"+hotKey(i), "fp", fingerprint, "status", "done", "locked_at", 1,
					"token", "t", "created_at", 1, "resp_status", 200, "resp_body", "ok").Err(); err != nil {
					b.Fatal(err)
				}
			}
			// The floor under a decision made inside a script (the store's
			// Begin is one): EVALSHA of a script whose only work is the
			// HMGET a Begin makes, answering two of its fields. Measured
			// beside the raw read, it says how much of a Begin's gap to
			// HMGET is the script engine's and how much the decision's.
			script := redis.NewScript(`local h = redis.call('HMGET', KEYS[1], 'fp', 'status', 'locked_at', 'token', 'created_at', 'resp_status', 'resp_body')
return {h[6], h[7]}`)
			if err := script.Load(ctx, rdb).Err(); err != nil {
				b.Fatal(err)
			}
			return map[string]op{
				"raw-write": func(ctx context.Context, p string, i int) error {
					return rdb.SetNX(ctx, "raw:"+ns+":w"+p+strconv.Itoa(i), "v", retention).Err()
				},
				"raw-script": func(ctx context.Context, p string, i int) error {
					return script.EvalSha(ctx, rdb, []string{"raw:" + ns + ":" + hotKey(i)}).Err()
				},
				"raw-read": func(ctx context.Context, p string, i int) error {
					return rdb.HMGet(ctx, "raw:"+ns+":"+hotKey(i), "fp", "status", "locked_at", "token", "created_at", "resp_status", "resp_body").Err()
				},
				"raw-ping": func(ctx context.Context, _ string, _ int) error { return rdb.Ping(ctx).Err() },
			}
		},
	}
}

const (
	tenant      = "bench"
	fingerprint = "fp-1"
)

func hotKey(i int) string { return "hot-" + strconv.Itoa(i%hotKeys) }

// op is one benchmarked call: i numbers it within the round, p is the
// round's own prefix for keys it creates (so no round finds the keys of an
// earlier one).
type op func(ctx context.Context, p string, i int) error

// block is how many calls of one kind a goroutine makes in a row before
// switching to the next kind: long enough that reading the clock around
// the block costs nothing next to it, short enough that the store and its
// baselines share every moment of a noisy machine.
const block = 64

// rounds numbers the benchmark rounds, for their key prefixes.
var rounds atomic.Int64

// measure runs b.N calls of each of ops (the store's operation first, then
// its baselines) on g goroutines, each goroutine alternating blocks of
// them, and reports each one's mean latency (<name>-ns/op) and the store's
// throughput as a fraction of each baseline's (store/<name>): at equal
// concurrency, the ratio of the latencies. Interleaving puts the store and
// the baselines under the same load at the same moments, so the ratios
// hold on a shared machine whose absolute figures wander. ns/op is the
// whole round's wall time per store call.
func measure(b *testing.B, g int, names []string, ops ...op) {
	b.Helper()
	ctx := context.Background()
	p := fmt.Sprintf("r%d-", rounds.Add(1))
	next := make([]atomic.Int64, len(ops))
	spent := make([]atomic.Int64, len(ops))
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for more := true; more; {
				more = false
				for k, o := range ops {
					lo := int(next[k].Add(block)) - block
					if lo >= b.N {
						continue
					}
					more = true
					hi := min(lo+block, b.N)
					t := time.Now()
					for i := lo; i < hi; i++ {
						if err := o(ctx, p, i); err != nil {
							failed.CompareAndSwap(nil, fmt.Errorf("%s: %w", names[k], err))
							return
						}
					}
					spent[k].Add(int64(time.Since(t)))
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	store := float64(spent[0].Load()) / float64(b.N)
	b.ReportMetric(store, names[0]+"-ns/op")
	for k := 1; k < len(ops); k++ {
		raw := float64(spent[k].Load()) / float64(b.N)
		b.ReportMetric(raw, names[k]+"-ns/op")
		b.ReportMetric(raw/store, "store/"+names[k])
	}
}

// expect runs Begin and fails unless it decides want.
func expect(ctx context.Context, s stores.Store, req stores.Request, want stores.Outcome) (stores.Decision, error) {
	d, err := s.Begin(ctx, req)
	if err != nil {
		return d, err
	}
	if d.Outcome != want {
		return d, fmt.Errorf("begin %s: got %v, want %v", req.KeyRef, d.Outcome, want)
	}
	return d, nil
}

// seed claims n keys named by name(i) (and completes them when done), so
// the benchmark decides on existing keys; it returns their tokens.
func seed(b *testing.B, e env, s stores.Store, n int, name func(int) string, done bool) []stores.Token {
	b.Helper()
	ctx := context.Background()
	toks := make([]stores.Token, n)
	var wg sync.WaitGroup
	var failed atomic.Value
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				req := stores.Request{KeyRef: stores.KeyRef{Tenant: tenant, Key: name(i)}, Fingerprint: fingerprint, Now: e.clock()}
				d, err := expect(ctx, s, req, stores.Claimed)
				if err == nil && done {
					err = s.Complete(ctx, req.KeyRef, d.Token, stores.Response{Status: 200, Body: "ok"})
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				toks[i] = d.Token
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return toks
}

// baselines are the raw operations each store operation is measured
// beside: writes beside a raw write, decisions on an existing key beside a
// primary-key read; both beside a ping where the backend has one, and
// the decisions beside the bare script read where the backend decides in
// a script (Redis).
var baselines = map[string][]string{
	"claim": {"raw-write", "raw-ping"}, "complete": {"raw-write", "raw-ping"}, "takeover": {"raw-write", "raw-ping"},
	"replay": {"raw-read", "raw-ping", "raw-script"}, "in-flight": {"raw-read", "raw-ping", "raw-script"}, "mismatch": {"raw-read", "raw-ping", "raw-script"},
}

// BenchmarkStores runs every store operation, interleaved with its raw
// baselines, on every backend, at each concurrency level.
func BenchmarkStores(b *testing.B) {
	for _, e := range envs() {
		b.Run(e.name, func(b *testing.B) {
			s, where := e.open(b, lockTTL)
			raw := e.raw(b, where)
			seed(b, e, s, hotKeys, hotKey, true)
			run := 0
			fresh := func(prefix string) func(int) string {
				run++
				p := fmt.Sprintf("%s-%d-", prefix, run)
				return func(i int) string { return p + strconv.Itoa(i) }
			}
			begin := func(st stores.Store, key func(int) string, fp string, want stores.Outcome) op {
				return func(ctx context.Context, _ string, i int) error {
					_, err := expect(ctx, st, stores.Request{KeyRef: stores.KeyRef{Tenant: tenant, Key: key(i)}, Fingerprint: fp, Now: e.clock()}, want)
					return err
				}
			}
			// bench measures the store's operation beside its baselines.
			bench := func(b *testing.B, g int, name string, o op) {
				names, ops := []string{name}, []op{o}
				for _, r := range baselines[name] {
					if f, ok := raw[r]; ok {
						names, ops = append(names, r), append(ops, f)
					}
				}
				measure(b, g, names, ops...)
			}
			for _, g := range goroutines {
				gname := "/g=" + strconv.Itoa(g)
				b.Run("claim"+gname, func(b *testing.B) {
					bench(b, g, "claim", begin(s, fresh("claim"), fingerprint, stores.Claimed))
				})
				b.Run("complete"+gname, func(b *testing.B) {
					key := fresh("complete")
					toks := seed(b, e, s, b.N, key, false)
					bench(b, g, "complete", func(ctx context.Context, _ string, i int) error {
						return s.Complete(ctx, stores.KeyRef{Tenant: tenant, Key: key(i)}, toks[i], stores.Response{Status: 200, Body: "ok"})
					})
				})
				b.Run("replay"+gname, func(b *testing.B) {
					bench(b, g, "replay", begin(s, hotKey, fingerprint, stores.Replay))
				})
				b.Run("mismatch"+gname, func(b *testing.B) {
					bench(b, g, "mismatch", begin(s, hotKey, "other", stores.Mismatch))
				})
				b.Run("in-flight"+gname, func(b *testing.B) {
					key := fresh("inflight")
					seed(b, e, s, hotKeys, key, false)
					bench(b, g, "in-flight", begin(s, func(i int) string { return key(i % hotKeys) }, fingerprint, stores.InFlight))
				})
				b.Run("takeover"+gname, func(b *testing.B) {
					// A store whose claims go stale at once: every claim
					// seeded here is taken over by the benchmark.
					ts, _ := e.open(b, takeoverTTL)
					key := fresh("takeover")
					seed(b, e, ts, b.N, key, false)
					time.Sleep(2 * takeoverTTL)
					bench(b, g, "takeover", func(ctx context.Context, _ string, i int) error {
						d, err := expect(ctx, ts, stores.Request{KeyRef: stores.KeyRef{Tenant: tenant, Key: key(i)}, Fingerprint: fingerprint, Now: e.clock()}, stores.Claimed)
						if err == nil && !d.Takeover {
							err = fmt.Errorf("begin %s: claimed without a takeover", key(i))
						}
						return err
					})
				})
			}
		})
	}
}
