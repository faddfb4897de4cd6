package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemcheck/idemcheck/stores"
)

const hour = time.Hour

func TestRegistered(t *testing.T) {
	b, err := stores.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if b.Clock != stores.ServerClock {
		t.Errorf("clock %q, want server", b.Clock)
	}
	// The statements table and the catalogue's rows for postgres agree.
	for _, v := range b.Variants() {
		if _, ok := variants[v]; !ok {
			t.Errorf("variant %q registered but has no statements", v)
		}
	}
	for v := range variants {
		if !b.HasVariant(v) {
			t.Errorf("variant %q has statements but no row of stores.Catalogue on postgres", v)
		}
	}
	r, err := stores.Lookup("postgres-replicated")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Mutants, []string{AsyncReplication}) {
		t.Errorf("postgres-replicated's mutants %v, want %s, the one it implements", r.Mutants, AsyncReplication)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]stores.Config{
		"unknown variant": {LockTTL: time.Second, Retention: hour, Variant: "nope"},
		"no lock TTL":     {Retention: hour},
		"bad namespace":   {LockTTL: time.Second, Retention: hour, Namespace: "a-b"},
		"long namespace":  {LockTTL: time.Second, Retention: hour, Namespace: strings.Repeat("n", 64)},
	} {
		if _, err := New(ctx, "postgres://127.0.0.1:1/none", cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestUnreachableServer: a server that is not there is an error from New.
func TestUnreachableServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := New(ctx, "postgres://idem:idem@127.0.0.1:1/idem?connect_timeout=2", stores.Config{LockTTL: time.Second, Retention: hour})
	if err == nil {
		t.Fatal("New against a closed port succeeded")
	}
}

// TestDecisionTable walks the rows of docs/DESIGN.md §1 that need no clock.
func TestDecisionTable(t *testing.T) {
	s := newStore(t, stores.Correct, hour, hour)
	ctx := ctxT(t)
	before := time.Now()

	d := mustBegin(t, s, req("k", "fp1"))
	wantOutcome(t, d, stores.Claimed)
	if d.Token == "" || d.Takeover {
		t.Fatalf("fresh claim: %+v", d)
	}
	if d.DecidedAt.Before(before.Add(-time.Minute)) || d.DecidedAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("DecidedAt %v is not the server's clock of now", d.DecidedAt)
	}
	last := d.DecidedAt

	d = mustBegin(t, s, req("k", "fp1"))
	wantOutcome(t, d, stores.InFlight)
	if d.Token != "" {
		t.Errorf("in-flight answer leaks the owner's token %q", d.Token)
	}
	if !d.DecidedAt.After(last) {
		t.Errorf("DecidedAt %v not after the previous decision's %v", d.DecidedAt, last)
	}
	wantOutcome(t, mustBegin(t, s, req("k", "fp2")), stores.Mismatch)

	resp := stores.Response{Status: 201, Body: `{"charge":"ch_1"}`}
	if err := s.Complete(ctx, ref("k"), "", resp); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("Complete with an empty token: %v, want ErrFenced", err)
	}
	other := mustBegin(t, s, req("k2", "fp1"))
	if err := s.Complete(ctx, ref("k"), other.Token, resp); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("Complete with another key's token: %v, want ErrFenced", err)
	}

	// Claim k4, complete it, then: Replay, Mismatch, and the writes fenced.
	c := mustBegin(t, s, req("k4", "fp"))
	if err := s.Complete(ctx, ref("k4"), c.Token, resp); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	d = mustBegin(t, s, req("k4", "fp"))
	wantOutcome(t, d, stores.Replay)
	if d.Response != resp {
		t.Errorf("replayed %+v, want %+v", d.Response, resp)
	}
	wantOutcome(t, mustBegin(t, s, req("k4", "other")), stores.Mismatch)
	if err := s.Complete(ctx, ref("k4"), c.Token, stores.Response{Status: 500}); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("second Complete: %v, want ErrFenced", err)
	}
	if err := s.Release(ctx, ref("k4"), c.Token); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("Release of a done key: %v, want ErrFenced", err)
	}
	if d := mustBegin(t, s, req("k4", "fp")); d.Response != resp {
		t.Errorf("after the fenced writes: %+v, want replay of %+v", d, resp)
	}
	if err := s.Complete(ctx, ref("missing"), c.Token, resp); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("Complete of a missing key: %v, want ErrFenced", err)
	}
}

// TestReleaseThenReclaim: a released key is claimed afresh with a new
// token, and the old token is fenced out.
func TestReleaseThenReclaim(t *testing.T) {
	s := newStore(t, stores.Correct, hour, hour)
	ctx := ctxT(t)
	a := mustBegin(t, s, req("k", "fp"))
	if err := s.Release(ctx, ref("k"), a.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := s.Release(ctx, ref("k"), a.Token); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("second Release: %v, want ErrFenced", err)
	}
	b := mustBegin(t, s, req("k", "other-fp")) // the key is gone: any fingerprint claims it
	wantOutcome(t, b, stores.Claimed)
	if b.Takeover || b.Token == a.Token {
		t.Errorf("reclaim after release: %+v (old token %q)", b, a.Token)
	}
	if err := s.Complete(ctx, ref("k"), a.Token, stores.Response{Status: 200}); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("Complete with the released token: %v, want ErrFenced", err)
	}
}

// TestTakeoverAfterLockTTL: a claim older than LockTTL by the server's
// clock is taken over with a new token, and the old owner's writes are
// fenced.
func TestTakeoverAfterLockTTL(t *testing.T) {
	t.Parallel()
	// Long enough that two calls in a row fit inside it on a loaded
	// machine (at 200 ms, a second Begin at load 28 came after LockTTL and
	// rightly took the key over).
	const ttl = time.Second
	s := newStore(t, stores.Correct, ttl, hour)
	ctx := ctxT(t)
	a := mustBegin(t, s, req("k", "fp"))
	wantOutcome(t, mustBegin(t, s, req("k", "fp")), stores.InFlight)
	time.Sleep(ttl + 50*time.Millisecond)

	wantOutcome(t, mustBegin(t, s, req("k", "other")), stores.Mismatch) // even when stale
	b := mustBegin(t, s, req("k", "fp"))
	wantOutcome(t, b, stores.Claimed)
	if !b.Takeover || b.Token == "" || b.Token == a.Token {
		t.Fatalf("takeover: %+v (old token %q)", b, a.Token)
	}
	if age := b.DecidedAt.Sub(a.DecidedAt); age < ttl {
		t.Errorf("taken over %v after the claim, LockTTL is %v", age, ttl)
	}
	wantOutcome(t, mustBegin(t, s, req("k", "fp")), stores.InFlight) // the new lock is live

	if err := s.Complete(ctx, ref("k"), a.Token, stores.Response{Status: 200, Body: "stale"}); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("stale Complete: %v, want ErrFenced", err)
	}
	if err := s.Release(ctx, ref("k"), a.Token); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("stale Release: %v, want ErrFenced", err)
	}
	resp := stores.Response{Status: 200, Body: "fresh"}
	if err := s.Complete(ctx, ref("k"), b.Token, resp); err != nil {
		t.Fatalf("new owner's Complete: %v", err)
	}
	time.Sleep(ttl + 50*time.Millisecond)
	if d := mustBegin(t, s, req("k", "fp")); d.Outcome != stores.Replay || d.Response != resp {
		t.Errorf("a done key past LockTTL: %+v, want replay of %+v", d, resp)
	}
}

// TestConcurrentClaims is the snapshot-visibility test: many clients Begin
// on one key at the same instant. Exactly one claims; every other gets an
// answer (InFlight), never an error nor an empty one, which a statement that
// reads the row from its snapshot beside INSERT … ON CONFLICT DO NOTHING
// gives its losers (see TestSnapshotVisibilityOfDoNothing).
func TestConcurrentClaims(t *testing.T) {
	const clients, keys = 32, 40
	s := newStore(t, stores.Correct, hour, hour)
	for k := range keys {
		// A deadline per key, not one for all of them: 40 rounds of 32
		// clients outlasted a shared 20 s on a machine at load 40, each
		// round's Begins answered in time.
		ctx := ctxT(t)
		key := fmt.Sprintf("race-%d", k)
		reqs := make([]stores.Request, clients)
		for i := range reqs {
			reqs[i] = req(key, "fp")
		}
		ds, errs := beginAll(ctx, s, reqs, nil)
		claimed := 0
		for i, d := range ds {
			// A Begin that found no session free before its deadline
			// changed nothing (stores.ErrNotApplied), which a loaded
			// machine makes of 32 clients on 16 sessions: asked again,
			// as a client would. Any other error fails.
			for try := 0; try < 3 && errors.Is(errs[i], stores.ErrNotApplied); try++ {
				ds[i], errs[i] = s.Begin(ctx, reqs[i])
				d = ds[i]
			}
			if errs[i] != nil {
				t.Fatalf("%s client %d: %v", key, i, errs[i])
			}
			switch d.Outcome {
			case stores.Claimed:
				claimed++
				if d.Takeover {
					t.Errorf("%s: a fresh key was taken over", key)
				}
			case stores.InFlight:
			default:
				t.Errorf("%s client %d: %+v", key, i, d)
			}
		}
		if claimed != 1 {
			t.Fatalf("%s: %d clients claimed, want exactly 1", key, claimed)
		}
	}
}

// TestConcurrentTakeover: many clients find one stale claim at once; the
// compare-and-set lets exactly one take it over. (If the clients take
// longer than LockTTL to get through the row lock, as under -race, the new
// claim goes stale in turn and is rightly taken over again: so every
// winner after the first must have decided at least LockTTL after the
// winner before it.)
func TestConcurrentTakeover(t *testing.T) {
	t.Parallel()
	const clients, keys, ttl = 32, 5, 300 * time.Millisecond
	s := newStore(t, stores.Correct, ttl, hour)
	ctx := ctxT(t)
	for k := range keys {
		mustBegin(t, s, req(fmt.Sprint("stale-", k), "fp"))
	}
	time.Sleep(ttl + 50*time.Millisecond)
	for k := range keys {
		key := fmt.Sprint("stale-", k)
		reqs := make([]stores.Request, clients)
		for i := range reqs {
			reqs[i] = req(key, "fp")
		}
		ds, errs := beginAll(ctx, s, reqs, nil)
		var won []stores.Decision
		for i, d := range ds {
			if errs[i] != nil {
				t.Fatalf("%s client %d: %v", key, i, errs[i])
			}
			if d.Outcome == stores.Claimed {
				won = append(won, d)
				if !d.Takeover {
					t.Errorf("%s: claimed without takeover: %+v", key, d)
				}
			} else if d.Outcome != stores.InFlight {
				t.Errorf("%s client %d: %+v", key, i, d)
			}
		}
		if len(won) == 0 {
			t.Fatalf("%s: nobody took the stale claim over", key)
		}
		slices.SortFunc(won, func(a, b stores.Decision) int { return a.DecidedAt.Compare(b.DecidedAt) })
		for i := 1; i < len(won); i++ {
			if gap := won[i].DecidedAt.Sub(won[i-1].DecidedAt); gap < ttl {
				t.Fatalf("%s: %d takers won, two of them %v apart (LockTTL %v)", key, len(won), gap, ttl)
			}
		}
		if len(won) > 1 {
			t.Logf("%s: the clients were slow (%v from first to last decision), and the claim was rightly taken over %d times", key, spread(ds), len(won))
		}
	}
}

// spread is the time from the first decision to the last.
func spread(ds []stores.Decision) time.Duration {
	lo, hi := ds[0].DecidedAt, ds[0].DecidedAt
	for _, d := range ds {
		if d.DecidedAt.Before(lo) {
			lo = d.DecidedAt
		}
		if d.DecidedAt.After(hi) {
			hi = d.DecidedAt
		}
	}
	return hi.Sub(lo)
}

// TestSnapshotVisibilityOfDoNothing shows the trap docs/DESIGN.md §1 warns of,
// on this server, with the load of TestConcurrentClaims: an INSERT … ON
// CONFLICT DO NOTHING that reads the existing row with a SELECT in the same
// statement gives some losers no row at all. The correct Begin must not be
// built that way; this is why it uses ON CONFLICT DO UPDATE. The trap is
// timing-dependent; it must spring at least once, or TestConcurrentClaims
// would prove nothing.
func TestSnapshotVisibilityOfDoNothing(t *testing.T) {
	const clients, keys = 32, 40
	s := newStore(t, stores.Correct, hour, hour)
	// A hang guard, not a timing: 1,280 statements at once took past
	// ctxT's 20 s on a machine at load 55.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	naive := strings.ReplaceAll(`
WITH ins AS (
    INSERT INTO {t} (tenant, key, fingerprint, status, locked_at, token, created_at, decision)
    VALUES ($1, $2, 'fp', 'in_flight', clock_timestamp(), gen_random_uuid()::text, clock_timestamp(), 'claimed')
    ON CONFLICT (tenant, key) DO NOTHING
    RETURNING 'claimed' AS outcome)
SELECT outcome FROM ins
UNION ALL
SELECT 'exists' FROM {t} WHERE tenant = $1 AND key = $2`, "{t}", pgx.Identifier{s.cfg.Namespace, "idempotency_keys"}.Sanitize())
	empty, total := 0, 0
	var mu sync.Mutex
	for k := range keys {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				rows, err := s.pool.Query(ctx, naive, []byte("t1"), []byte(fmt.Sprint("naive-", k)))
				if err != nil {
					t.Error(err)
					return
				}
				got, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total++
				if len(got) == 0 {
					empty++
				}
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
	}
	t.Logf("INSERT … ON CONFLICT DO NOTHING + SELECT: %d of %d answers were empty", empty, total)
	if empty == 0 {
		t.Errorf("the load of TestConcurrentClaims never sprang the trap: it could not catch a store built that way")
	}
}

// TestTenantScoping: one key in two tenants is two keys.
func TestTenantScoping(t *testing.T) {
	s := newStore(t, stores.Correct, hour, hour)
	ctx := ctxT(t)
	a := stores.Request{KeyRef: stores.KeyRef{Tenant: "acme", Key: "order-1"}, Fingerprint: "fpA"}
	b := stores.Request{KeyRef: stores.KeyRef{Tenant: "globex", Key: "order-1"}, Fingerprint: "fpB"}
	none := stores.Request{KeyRef: stores.KeyRef{Tenant: "", Key: "order-1"}, Fingerprint: "fpC"}
	da, db, dn := mustBegin(t, s, a), mustBegin(t, s, b), mustBegin(t, s, none)
	for _, d := range []stores.Decision{da, db, dn} {
		wantOutcome(t, d, stores.Claimed)
	}
	if err := s.Complete(ctx, b.KeyRef, da.Token, stores.Response{Status: 200}); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("acme's token completed globex's key: %v", err)
	}
	if err := s.Complete(ctx, a.KeyRef, da.Token, stores.Response{Status: 200, Body: "acme"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, b.KeyRef, db.Token, stores.Response{Status: 200, Body: "globex"}); err != nil {
		t.Fatal(err)
	}
	if d := mustBegin(t, s, a); d.Response.Body != "acme" {
		t.Errorf("acme replays %+v", d)
	}
	if d := mustBegin(t, s, b); d.Response.Body != "globex" {
		t.Errorf("globex replays %+v", d)
	}
	wantOutcome(t, mustBegin(t, s, none), stores.InFlight)
}

// TestInvalidKeys: empty and over-long keys (and tenants) are refused with
// ErrInvalidKey by every method, before any round trip; 255 bytes is fine.
func TestInvalidKeys(t *testing.T) {
	s := newStore(t, stores.Correct, hour, hour)
	ctx := ctxT(t)
	bad := []stores.KeyRef{
		{Tenant: "t", Key: ""},
		{Tenant: "t", Key: strings.Repeat("k", 256)},
		{Tenant: strings.Repeat("t", 256), Key: "k"},
	}
	for _, k := range bad {
		if _, err := s.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "fp"}); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("Begin(%d-byte key, %d-byte tenant): %v, want ErrInvalidKey", len(k.Key), len(k.Tenant), err)
		}
		if err := s.Complete(ctx, k, "tok", stores.Response{}); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("Complete: %v, want ErrInvalidKey", err)
		}
		if err := s.Release(ctx, k, "tok"); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("Release: %v, want ErrInvalidKey", err)
		}
	}
	long := stores.Request{KeyRef: stores.KeyRef{Tenant: strings.Repeat("t", 255), Key: strings.Repeat("k", 255)}, Fingerprint: "fp"}
	wantOutcome(t, mustBegin(t, s, long), stores.Claimed)
	// A 256-byte key is refused, not truncated onto the 255-byte one.
	over := long
	over.Key += "k"
	if _, err := s.Begin(ctx, over); !errors.Is(err, stores.ErrInvalidKey) {
		t.Errorf("256-byte key: %v", err)
	}
}

// TestBinaryKeys: keys, tenants, fingerprints and bodies are bytes, stored
// as bytea: NUL bytes and invalid UTF-8 round-trip and stay distinct.
func TestBinaryKeys(t *testing.T) {
	s := newStore(t, stores.Correct, hour, hour)
	ctx := ctxT(t)
	keys := []string{"a\x00b", "a\x00c", "a", "\xff", "\xfe", "\xff\xfe\x00", "é", "e\u0301"}
	for i, k := range keys {
		r := stores.Request{KeyRef: stores.KeyRef{Tenant: "\x00\xc3", Key: k}, Fingerprint: "fp\x00\xff" + k}
		d := mustBegin(t, s, r)
		wantOutcome(t, d, stores.Claimed)
		body := fmt.Sprintf("body\x00\xff%d", i)
		if err := s.Complete(ctx, r.KeyRef, d.Token, stores.Response{Status: 200, Body: body}); err != nil {
			t.Fatalf("Complete(%q): %v", k, err)
		}
	}
	for i, k := range keys {
		r := stores.Request{KeyRef: stores.KeyRef{Tenant: "\x00\xc3", Key: k}, Fingerprint: "fp\x00\xff" + k}
		d := mustBegin(t, s, r)
		if want := fmt.Sprintf("body\x00\xff%d", i); d.Outcome != stores.Replay || d.Response.Body != want {
			t.Errorf("key %q: %+v, want replay of %q", k, d, want)
		}
		r.Fingerprint = "fp\x00\xfe" + k
		wantOutcome(t, mustBegin(t, s, r), stores.Mismatch)
	}
}

// TestPrune: keys older than Retention by the server's clock go; younger
// ones, done or in flight, stay. The caller's now is ignored. "young" is
// held to staying only while the server's clock, read after a prune, says
// it was younger than Retention all through it: on a loaded machine (CI:
// a 0.5-3 s deschedule) the 300 ms retention can pass between its claim
// and a prune, and the prune then rightly takes it too.
func TestPrune(t *testing.T) {
	t.Parallel()
	const retention = 300 * time.Millisecond
	s := newStore(t, stores.Correct, hour, retention)
	ctx := ctxT(t)
	old := mustBegin(t, s, req("old", "fp"))
	if err := s.Complete(ctx, ref("old"), old.Token, stores.Response{Status: 200}); err != nil {
		t.Fatal(err)
	}
	mustBegin(t, s, req("old-in-flight", "fp"))
	time.Sleep(retention + 50*time.Millisecond)
	young := mustBegin(t, s, req("young", "fp"))
	// youngAfter says whether "young" (claimed at its DecidedAt, its
	// created_at) was still younger than Retention on the server's clock
	// after the prune it follows.
	youngAfter := func() bool {
		var now time.Time
		if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		if age := now.Sub(young.DecidedAt); age >= retention {
			t.Logf("young was %v old after the prune (a loaded machine): it may be pruned", age)
			return false
		}
		return true
	}
	n, err := s.Prune(ctx, time.Now().Add(-24*hour)) // a caller clock far behind changes nothing
	if err != nil {
		t.Fatal(err)
	}
	stays := youngAfter()
	if n != 2 && (stays || n != 3) {
		t.Errorf("pruned %d, want 2", n)
	}
	wantOutcome(t, mustBegin(t, s, req("old", "fp")), stores.Claimed)
	if d := mustBegin(t, s, req("young", "fp")); stays || n == 2 {
		wantOutcome(t, d, stores.InFlight)
	}
	// "young" is the oldest key left: while it is young, nothing is.
	if n, err := s.Prune(ctx, time.Now().Add(24*hour)); err != nil || (n != 0 && youngAfter()) {
		t.Errorf("second prune: %d, %v; want 0", n, err)
	}
}

// TestSchemaCreationRace: many stores opening one new namespace at once
// all succeed (the advisory lock), and share the table.
func TestSchemaCreationRace(t *testing.T) {
	dsn := testDSN(t)
	for round := range 3 {
		ns := freshNamespace(t, dsn)
		cfg := stores.Config{LockTTL: hour, Retention: hour, Namespace: ns}
		ss := make([]*Store, 8)
		errs := make([]error, len(ss))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range ss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ss[i], errs[i] = New(context.Background(), dsn, cfg)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, store %d: %v", round, i, err)
			}
			defer ss[i].Close()
		}
		wantOutcome(t, mustBegin(t, ss[0], req("k", "fp")), stores.Claimed)
		for _, s := range ss[1:] {
			wantOutcome(t, mustBegin(t, s, req("k", "fp")), stores.InFlight)
		}
	}
}

// TestDefaultSchema: without a namespace the table lives in "idemcheck".
func TestDefaultSchema(t *testing.T) {
	dsn := testDSN(t)
	s, err := New(context.Background(), dsn, stores.Config{LockTTL: hour, Retention: hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var found bool
	if err := s.pool.QueryRow(ctxT(t), `SELECT to_regclass('idemcheck.idempotency_keys') IS NOT NULL`).Scan(&found); err != nil || !found {
		t.Fatalf("idemcheck.idempotency_keys: found %v, %v", found, err)
	}
	key := fmt.Sprintf("default-schema-%d", time.Now().UnixNano()) // the schema outlives the test
	d := mustBegin(t, s, req(key, "fp"))
	wantOutcome(t, d, stores.Claimed)
	if err := s.Release(ctxT(t), ref(key), d.Token); err != nil {
		t.Fatal(err)
	}
}
