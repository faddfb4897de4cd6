// Package redis is the Redis store: the contract of docs/DESIGN.md §1 as one Lua
// script per operation, on go-redis/v9.
//
// # Scripts
//
// Begin, Complete and Release are each one Lua script (see scripts.go),
// loaded once with SCRIPT LOAD at Open and run by SHA with EVALSHA. If the
// server has lost its script cache (a restart, a failover, SCRIPT FLUSH) it
// answers NOSCRIPT without running anything, so the store loads the script
// again and retries once: that retry cannot run the script twice.
//
// A script runs atomically, so Begin's whole decision (claim, mismatch,
// replay, in flight, takeover of a stale claim) is one step: the takeover is
// a compare-and-set on the token it judged stale, and there is one winner.
// Complete and Release write only while the key is in flight under the
// caller's token, else ErrFenced.
//
// # Time
//
// Staleness is judged by the server's clock, read with TIME inside the Begin
// script (one clock for every client; Request.Now is ignored), in whole
// milliseconds. Decision.DecidedAt is that reading.
//
// # Keys
//
// Each key is one hash named
//
//	idem:<namespace>:<len(tenant)>:<tenant>:<key>
//
// The tenant's length prefix keeps tenants apart whatever bytes the tenant
// and key hold (tenant "a:b" key "c" and tenant "a" key "b:c" differ), and
// the namespace (Config.Namespace: letters, digits, underscores) lets many
// stores share one server. Every script touches only its one key, so the
// store also works on Redis Cluster.
//
// # Retention
//
// A key expires Retention after its first claim (PEXPIREAT created_at +
// Retention, in the claim's script): Redis's expiry is the pruning, and
// Prune does nothing. Nothing refreshes the expiry: not a takeover, not
// Complete. So a key lives exactly Retention from the first request, the
// window a client's retries are bounded by, and the rule matches the
// reference store's (created_at + Retention). A claim still in flight at that
// moment expires too; its Complete is then fenced.
//
// # Durability
//
// A claim is only as safe as its persistence. Redis acknowledges a script
// before it reaches disk unless the server runs with AOF and
// `appendfsync always`; with `everysec` a crash loses up to a second of
// claims, and without AOF (RDB snapshots, or none) it loses everything since
// the last snapshot. A forgotten claim lets a retry claim the key again and
// run the work twice. Open reads `CONFIG GET appendonly` and `appendfsync`
// and Durability reports the result, so a harness can warn; Open does not
// fail when CONFIG is disabled or the settings are unsafe. Replication is
// asynchronous too: a failover to a replica can forget acknowledged claims
// just as a crash can, so run one primary (or accept that risk knowingly).
//
// The scripts need Redis 5 or later (TIME before writes relies on effects
// replication of scripts, the default since 5.0); they are tested on 7.
//
// # Errors and retries
//
// The client is configured with no automatic retries (MaxRetries -1). A
// Begin or Complete is not idempotent: if its reply is lost, the script may
// have run, and a blind resend could answer "in flight" to the very caller
// that now owns the claim, or "fenced" to a Complete that landed. So a
// network error or a timeout is returned as an error, and the caller records
// an unknown outcome; nothing is guessed. Context deadlines apply to the
// socket (ContextTimeoutEnabled).
//
// # Mutants
//
// Its store-side mutants (its rows of stores.Catalogue) are the correct
// scripts with a line or two replaced (the variants table in scripts.go). Three split Begin
// into two round trips with the failpoint faults.BeginAfterSelect between
// them, as the bug they re-create does.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

func init() {
	stores.Register(stores.Backend{
		Name:     "redis",
		CallWall: 2 * time.Millisecond, FaultWall: 5 * time.Second,
		Clock:      stores.ServerClock,
		Lives:      stores.Server,
		Mutants:    Mutants,
		Statements: true,
		Equivalent: Equivalent,
		// Commands and scripts run one at a time on the server: nothing
		// waits for another client; the pool (10 per CPU) outnumbers an
		// episode's clients.
		WaitsAnnounced: true,
		Open: func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
			return New(ctx, addr, cfg)
		},
	})
	stores.Register(stores.Backend{
		Name:     "redis-replicated",
		CallWall: 2 * time.Millisecond, FaultWall: 5 * time.Second,
		Clock:      stores.ServerClock,
		Lives:      stores.Server,
		Replicated: "redis",
		Mutants:    stores.MutantsOn("redis-replicated"),
		Open: func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
			return NewReplicated(ctx, addr, cfg)
		},
	})
}

// Mutants lists the mutant variants this backend implements: its rows of
// stores.Catalogue, store side (those of every table backend and
// split-claim, a bug of Redis's protocol alone) and configuration
// (NoPersistence).
var Mutants = stores.MutantsOn("redis")

// ErrNotDurable is wrapped by the error Durability returns when the server's
// persistence can lose an acknowledged claim in a crash.
var ErrNotDurable = errors.New("redis persistence can lose acknowledged claims: run with appendonly yes and appendfsync always")

// Store is an idempotency-key store on one Redis server. It is safe for
// concurrent use.
type Store struct {
	rdb        *goredis.Client
	variant    string
	scripts    *scriptSet
	prefix     string
	lockTTL    int64 // ms
	retention  int64 // ms
	durability string
	durErr     error
	restore    func() // redis-no-persistence: the server's settings back, at Close
	replicas   int    // redis-replicated: replicas every reply waits for (WAIT)
	// lateAfter, when set, is how long a claim may take and still be
	// handed out (redis-replicated: see stores.ErrLateClaim).
	lateAfter time.Duration
}

// Variant is the variant the store runs: "correct" or a mutant's name.
func (s *Store) Variant() string { return s.variant }

// load sends the script with SCRIPT LOAD and checks the server's SHA.
func (s *Store) load(ctx context.Context, sc *script) error {
	sha, err := s.rdb.ScriptLoad(ctx, sc.src).Result()
	if err != nil {
		return fmt.Errorf("redis: SCRIPT LOAD %s: %w", sc.name, err)
	}
	if sha != sc.sha {
		return fmt.Errorf("redis: SCRIPT LOAD %s: server says SHA %s, want %s", sc.name, sha, sc.sha)
	}
	return nil
}

// eval runs the script by SHA. On NOSCRIPT (the server lost its script
// cache; the script did not run) it loads the script and runs it once more.
func (s *Store) eval(ctx context.Context, sc *script, key string, args ...any) (any, error) {
	v, err := s.evalOnce(ctx, sc, key, args)
	if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := s.load(ctx, sc); err != nil {
			return nil, err
		}
		v, err = s.evalOnce(ctx, sc, key, args)
	}
	if err != nil {
		faults.Tracef(ctx, "EVALSHA "+sc.name, "error: %v", err)
		return nil, fmt.Errorf("redis: %s: %w", sc.name, err)
	}
	if faults.Tracing(ctx) {
		faults.Trace(ctx, "EVALSHA "+sc.name, traceReply(v))
	}
	return v, nil
}

// evalOnce sends EVALSHA; on the synchronous replicated store it sends
// it in one pipeline, on one connection, with a barrier (see waitBarrier).
func (s *Store) evalOnce(ctx context.Context, sc *script, key string, args []any) (any, error) {
	if s.replicas == 0 {
		return s.rdb.EvalSha(ctx, sc.sha, []string{key}, args...).Result()
	}
	pipe := s.rdb.Pipeline()
	ev := pipe.EvalSha(ctx, sc.sha, []string{key}, args...)
	wait := waitBarrier(ctx, pipe, s.prefix, s.replicas)
	_, _ = pipe.Exec(ctx)
	v, err := ev.Result()
	if err != nil {
		return nil, err
	}
	n, err := wait.Int64()
	if err != nil {
		return nil, fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, err)
	}
	if n < int64(s.replicas) {
		return nil, fmt.Errorf("%w: %d of %d replica(s) within %v", ErrNotReplicated, n, s.replicas, waitTimeout)
	}
	return v, nil
}

// traceReply prints a script's reply for faults.Trace, tokens shortened.
func traceReply(v any) string {
	arr, ok := v.([]any)
	if !ok {
		return fmt.Sprint(v)
	}
	parts := make([]string, len(arr))
	for i, x := range arr {
		if str, ok := x.(string); ok {
			x = faults.ShortToken(str)
		}
		parts[i] = fmt.Sprint(x)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// redisKey names the key's hash: the namespace, then the tenant with its
// length in front (so no tenant's bytes can run into the key's), then the key.
func (s *Store) redisKey(k stores.KeyRef) string {
	k = stores.StoredKey(s.variant, k) // case-folded-key, tenant-blind
	var b strings.Builder
	b.Grow(len(s.prefix) + 8 + len(k.Tenant) + len(k.Key))
	b.WriteString(s.prefix)
	b.WriteString(strconv.Itoa(len(k.Tenant)))
	b.WriteByte(':')
	b.WriteString(k.Tenant)
	b.WriteByte(':')
	b.WriteString(k.Key)
	return b.String()
}

// newToken returns a random 128-bit owner id: unique across the key's life.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b[:])
}

// Complete saves the response and marks the key done, only while it is in
// flight under tok; otherwise ErrFenced.
func (s *Store) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	if err := stores.ValidateKey(key); err != nil {
		return err
	}
	return s.fenced(ctx, s.scripts.complete, key, string(tok), resp.Status, resp.Body)
}

// Release deletes the claim, only while the key is in flight under tok;
// otherwise ErrFenced and the key is left alone.
func (s *Store) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	if err := stores.ValidateKey(key); err != nil {
		return err
	}
	return s.fenced(ctx, s.scripts.release, key, string(tok))
}

// fenced runs Complete's or Release's script: 1 written, 0 fenced.
func (s *Store) fenced(ctx context.Context, sc *script, key stores.KeyRef, args ...any) error {
	v, err := s.eval(ctx, sc, s.redisKey(key), args...)
	if err != nil {
		return err
	}
	switch v {
	case int64(1):
		return nil
	case int64(0):
		return stores.ErrFenced
	}
	return fmt.Errorf("redis: %s: unexpected reply %#v", sc.name, v)
}

// Prune does nothing and returns (0, nil): every key carries a server-side
// expiry set when it is first claimed (created_at + Retention), and Redis
// deletes it then. The server's clock decides, so now is ignored.
//
// The prune-sweeps-in-flight mutant is a "cleanup of abandoned claims"
// that someone added: it scans the namespace and deletes every key still
// in flight, whatever its age.
func (s *Store) Prune(ctx context.Context, now time.Time) (int, error) {
	if s.variant != "prune-sweeps-in-flight" {
		return 0, nil
	}
	n := 0
	iter := s.rdb.Scan(ctx, 0, s.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if st, err := s.rdb.HGet(ctx, iter.Val(), "status").Result(); err == nil && st == "in_flight" {
			if d, err := s.rdb.Del(ctx, iter.Val()).Result(); err == nil {
				n += int(d)
			}
		}
	}
	return n, iter.Err()
}

// Close closes the client's connections.
func (s *Store) Close() error {
	if s.restore != nil {
		s.restore()
	}
	return s.rdb.Close()
}

// roundTrips is the client's hook: it passes the failpoint
// faults.BeforeRoundTrip before every command, script or pipeline, so a
// harness can interleave an operation made of several round trips whichever
// code sends them (and crash the caller there). Nothing happens without a
// failpoint handler.
type roundTrips struct{}

// DialHook passes dials through.
func (roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

// ProcessHook passes the failpoint before a command.
func (roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if err := faults.Hit(ctx, faults.BeforeRoundTrip); err != nil {
			return err
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook passes the failpoint before a pipeline.
func (roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if err := faults.Hit(ctx, faults.BeforeRoundTrip); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// ShowRow describes the key's hash (stores.RowShower), for a demo.
func (s *Store) ShowRow(ctx context.Context, key stores.KeyRef) (string, error) {
	row, err := s.rdb.HGetAll(ctx, s.redisKey(key)).Result()
	if err != nil {
		return "", err
	}
	if len(row) == 0 {
		return stores.NoRow, nil
	}
	status, _ := strconv.Atoi(row["resp_status"])
	return stores.RowLine(row["status"], row["token"], row["fp"], status, row["resp_body"]), nil
}
