package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

func TestRegistered(t *testing.T) {
	b, err := stores.Lookup("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if b.Clock != stores.CallerClock {
		t.Errorf("clock = %v, want caller", b.Clock)
	}
	// Every row of stores.Catalogue on sqlite has its edit: a statement
	// of its own, or its bug in Go.
	inGo := []string{"token-reuse", "case-folded-key", "tenant-blind", "joined-key", "fingerprint-drops-amount"} // tokenFor, stores.StoredKey, stores.StoredFingerprint
	for _, m := range b.Mutants {
		edited, goOnly := statementsFor(m) != correct, slices.Contains(inGo, m)
		if edited == goOnly {
			t.Errorf("mutant %s: statements edited: %v; its bug listed as in Go: %v", m, edited, goOnly)
		}
	}
	for _, v := range b.Variants() {
		s, err := b.Open(context.Background(), dbPath(t), testConfig(v))
		if err != nil {
			t.Fatalf("Open(%s): %v", v, err)
		}
		if got := s.(*Store).Variant(); got != v {
			t.Errorf("Open(%s) runs %s", v, got)
		}
		s.Close()
	}
	s, err := b.Open(context.Background(), dbPath(t), testConfig("no-such-mutant"))
	if err == nil || s != nil {
		t.Fatalf("Open(unknown variant) = %v, %v; want a nil Store and an error", s, err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, []byte("not a database, but long enough to have a header: "+strings.Repeat("x", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		cfg        stores.Config
		want       string
	}{
		{"empty path", "", testConfig(""), "need a database file path"},
		{"memory", ":memory:", testConfig(""), "need a database file path"},
		{"missing dir", filepath.Join(dir, "nope", "x.db"), testConfig(""), "no such file or directory"},
		{"parent is a file", filepath.Join(file, "x.db"), testConfig(""), "is not a directory"},
		{"path is a dir", dir, testConfig(""), "is a directory"},
		{"not a database", file, testConfig(""), "not a database"},
		{"bad config", filepath.Join(dir, "y.db"), stores.Config{LockTTL: 0, Retention: time.Hour}, "lock TTL"},
		{"unknown variant", filepath.Join(dir, "z.db"), testConfig("nope"), `unknown variant "nope"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(context.Background(), c.path, c.cfg)
			if err == nil {
				s.Close()
				t.Fatalf("New(%q) succeeded", c.path)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New(%q) = %v, want it to say %q", c.path, err, c.want)
			}
			t.Logf("%v", err)
		})
	}
	t.Run("foreign table", func(t *testing.T) {
		p := dbPath(t)
		s := openAt(t, p, "")
		if _, err := s.db.Exec(`DROP TABLE idempotency_keys; CREATE TABLE idempotency_keys (key TEXT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		_, err := New(context.Background(), p, testConfig(""))
		if err == nil || !strings.Contains(err.Error(), "another layout") {
			t.Fatalf("New over a foreign table = %v, want a layout error", err)
		}
	})
	t.Run("path with URI characters", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "odd ?#%name.db")
		s := openAt(t, p, "")
		mustClaim(t, s, req(key("k"), "fp", t0), false)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the database is not at the path given: %v", err)
		}
	})
}

// TestPragmasOnEveryConnection holds several connections of the pool at once
// and checks each was configured by the DSN.
func TestPragmasOnEveryConnection(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	for i := range 4 {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var busy int
		var mode string
		var sync int
		if err := c.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if busy != 5000 || mode != "wal" || sync != 2 {
			t.Errorf("connection %d: busy_timeout=%d journal_mode=%s synchronous=%d, want 5000 wal 2 (FULL)", i, busy, mode, sync)
		}
	}
}

// TestDecisionTable walks every row of docs/DESIGN.md §1 with explicit clocks.
func TestDecisionTable(t *testing.T) {
	s := open(t, "")
	k := key("order-1")

	d := begin(t, s, req(k, "fp1", t0))
	wantOutcome(t, d, stores.Claimed)
	if d.Takeover || d.Token == "" || !d.DecidedAt.Equal(t0) {
		t.Fatalf("first Begin = %+v, want a fresh claim with a token decided at t0", d)
	}
	tok := d.Token

	// In flight, lock younger than LockTTL: 409, whatever the fingerprint says
	// about Mismatch (a different one is still 422).
	for _, now := range []time.Time{t0, t0.Add(time.Second), t0.Add(lockTTL - time.Nanosecond)} {
		d = begin(t, s, req(k, "fp1", now))
		wantOutcome(t, d, stores.InFlight)
		if !d.DecidedAt.Equal(now) || d.Token != "" {
			t.Fatalf("in-flight decision = %+v, want no token, decided at %v", d, now)
		}
	}
	wantOutcome(t, begin(t, s, req(k, "fp2", t0.Add(time.Second))), stores.Mismatch)
	wantOutcome(t, begin(t, s, req(k, "fp2", t0.Add(time.Hour))), stores.Mismatch) // stale, other params: still 422

	// Done: Replay with the saved response; another fingerprint: Mismatch.
	want := stores.Response{Status: 201, Body: `{"charge":"ch_1"}`}
	if err := s.Complete(context.Background(), k, tok, want); err != nil {
		t.Fatal(err)
	}
	d = begin(t, s, req(k, "fp1", t0.Add(2*time.Second)))
	wantOutcome(t, d, stores.Replay)
	if d.Response != want || d.Token != "" {
		t.Fatalf("replay = %+v, want response %+v and no token", d, want)
	}
	wantOutcome(t, begin(t, s, req(k, "fp1", t0.Add(time.Hour))), stores.Replay) // done never goes stale
	wantOutcome(t, begin(t, s, req(k, "fp2", t0.Add(3*time.Second))), stores.Mismatch)
	// Completing twice is fenced: the claim is over.
	if err := s.Complete(context.Background(), k, tok, stores.Response{Status: 500}); !errors.Is(err, stores.ErrFenced) {
		t.Fatalf("second Complete = %v, want ErrFenced", err)
	}
	if err := s.Release(context.Background(), k, tok); !errors.Is(err, stores.ErrFenced) {
		t.Fatalf("Release after Complete = %v, want ErrFenced", err)
	}
	d = begin(t, s, req(k, "fp1", t0.Add(4*time.Second)))
	if d.Outcome != stores.Replay || d.Response != want {
		t.Fatalf("after fenced writes: %+v, want the first response replayed", d)
	}
}

// TestTakeover: at exactly LockTTL the claim is stale and taken over with a
// new token; the old owner is fenced; the new one completes.
func TestTakeover(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	k := key("order-2")
	old := mustClaim(t, s, req(k, "fp", t0), false)
	wantOutcome(t, begin(t, s, req(k, "fp", t0.Add(lockTTL-1))), stores.InFlight)
	at := t0.Add(lockTTL)
	d := begin(t, s, req(k, "fp", at))
	if d.Outcome != stores.Claimed || !d.Takeover || d.Token == old || !d.DecidedAt.Equal(at) {
		t.Fatalf("Begin at LockTTL = %+v, want a takeover with a new token", d)
	}
	tok := d.Token
	// The takeover restarted the lock: in flight again from `at`.
	wantOutcome(t, begin(t, s, req(k, "fp", at.Add(lockTTL-1))), stores.InFlight)

	// Fencing: the old owner's writes are rejected and change nothing.
	if err := s.Complete(ctx, k, old, stores.Response{Status: 200, Body: "stale"}); !errors.Is(err, stores.ErrFenced) {
		t.Fatalf("stale Complete = %v, want ErrFenced", err)
	}
	if err := s.Release(ctx, k, old); !errors.Is(err, stores.ErrFenced) {
		t.Fatalf("stale Release = %v, want ErrFenced", err)
	}
	if n := rowCount(t, s, k); n != 1 {
		t.Fatalf("stale Release deleted the new owner's claim")
	}
	if err := s.Complete(ctx, k, tok, stores.Response{Status: 200, Body: "fresh"}); err != nil {
		t.Fatalf("new owner's Complete: %v", err)
	}
	d = begin(t, s, req(k, "fp", at.Add(time.Second)))
	if d.Outcome != stores.Replay || d.Response.Body != "fresh" {
		t.Fatalf("after takeover and complete: %+v, want the new owner's response", d)
	}
}

// TestRelease: a released key can be claimed again, with a token never seen
// before, and the old token stays fenced.
func TestRelease(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	k := key("order-3")
	seen := map[stores.Token]bool{}
	var prev stores.Token
	for i := range 5 {
		tok := mustClaim(t, s, req(k, "fp", t0), false) // same clock reading every time
		if seen[tok] {
			t.Fatalf("claim %d reused token %s", i, tok)
		}
		seen[tok] = true
		if prev != "" {
			if err := s.Complete(ctx, k, prev, stores.Response{Status: 200}); !errors.Is(err, stores.ErrFenced) {
				t.Fatalf("released token completed a later claim: %v", err)
			}
		}
		if err := s.Release(ctx, k, tok); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := s.Release(ctx, k, tok); !errors.Is(err, stores.ErrFenced) {
			t.Fatalf("second Release = %v, want ErrFenced", err)
		}
		prev = tok
	}
	if err := s.Complete(ctx, key("never-claimed"), "x", stores.Response{}); !errors.Is(err, stores.ErrFenced) {
		t.Fatalf("Complete of an absent key = %v, want ErrFenced", err)
	}
}

func TestTenantScoping(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	a := stores.KeyRef{Tenant: "acme", Key: "k"}
	b := stores.KeyRef{Tenant: "globex", Key: "k"}
	none := stores.KeyRef{Tenant: "", Key: "k"}
	ta := mustClaim(t, s, req(a, "fp-a", t0), false)
	tb := mustClaim(t, s, req(b, "fp-b", t0), false) // same key, other tenant: its own claim
	tn := mustClaim(t, s, req(none, "fp-n", t0), false)
	// A token is no good in another tenant, even for the same key.
	if err := s.Complete(ctx, b, ta, stores.Response{Status: 200}); !errors.Is(err, stores.ErrFenced) {
		t.Fatalf("cross-tenant Complete = %v, want ErrFenced", err)
	}
	if err := s.Release(ctx, a, tb); !errors.Is(err, stores.ErrFenced) {
		t.Fatalf("cross-tenant Release = %v, want ErrFenced", err)
	}
	if err := s.Complete(ctx, a, ta, stores.Response{Status: 200, Body: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, b, tb); err != nil {
		t.Fatal(err)
	}
	if d := begin(t, s, req(a, "fp-a", t0)); d.Outcome != stores.Replay || d.Response.Body != "a" {
		t.Fatalf("tenant a: %+v", d)
	}
	mustClaim(t, s, req(b, "fp-other", t0), false) // released in b; a's done row doesn't matter
	wantOutcome(t, begin(t, s, req(none, "fp-n", t0)), stores.InFlight)
	_ = tn
	// Tenants are bytes too: "a" + "bc" must not collide with "ab" + "c".
	mustClaim(t, s, req(stores.KeyRef{Tenant: "a", Key: "bc"}, "x", t0), false)
	mustClaim(t, s, req(stores.KeyRef{Tenant: "ab", Key: "c"}, "y", t0), false)
}

func TestInvalidKeys(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	bad := []stores.KeyRef{
		{Tenant: "acme", Key: ""},
		{Tenant: "acme", Key: strings.Repeat("k", 256)},
		{Tenant: "acme", Key: strings.Repeat("\xff", 1000)},
		{Tenant: strings.Repeat("t", 256), Key: "k"},
	}
	for _, k := range bad {
		if _, err := s.Begin(ctx, req(k, "fp", t0)); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("Begin(%d-byte key) = %v, want ErrInvalidKey", len(k.Key), err)
		}
		if err := s.Complete(ctx, k, "t", stores.Response{}); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("Complete(%d-byte key) = %v, want ErrInvalidKey", len(k.Key), err)
		}
		if err := s.Release(ctx, k, "t"); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("Release(%d-byte key) = %v, want ErrInvalidKey", len(k.Key), err)
		}
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM idempotency_keys`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("invalid keys left %d rows (%v)", n, err)
	}
	// The limits themselves are valid: 1 and 255 bytes, kept whole.
	for _, k := range []stores.KeyRef{{Tenant: "acme", Key: "k"}, {Tenant: "acme", Key: strings.Repeat("k", 255)}, {Tenant: strings.Repeat("t", 255), Key: "k"}} {
		mustClaim(t, s, req(k, "fp", t0), false)
		var l int
		if err := s.db.QueryRow(`SELECT length(key) FROM idempotency_keys WHERE tenant = ? AND key = ?`, blob(k.Tenant), blob(k.Key)).Scan(&l); err != nil || l != len(k.Key) {
			t.Fatalf("stored key length %d (%v), want %d", l, err, len(k.Key))
		}
	}
}

// TestBytesRoundTrip: keys, tenants, fingerprints and bodies are byte
// strings; NUL and invalid UTF-8 are kept, and keys that differ only after a
// NUL or in invalid bytes are different keys.
func TestBytesRoundTrip(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	keys := []stores.KeyRef{
		{Tenant: "t", Key: "a"},
		{Tenant: "t", Key: "a\x00"},
		{Tenant: "t", Key: "a\x00b"},
		{Tenant: "t", Key: "\x00"},
		{Tenant: "t", Key: "\xff\xfe"},
		{Tenant: "t", Key: "\xff\xfd"},
		{Tenant: "t\x00", Key: "a"},
		{Tenant: "\xc3", Key: "\x28"},
		{Tenant: "", Key: "é"},
		{Tenant: "", Key: "e\u0301"}, // same text to a human, other bytes
	}
	bodies := []string{"", "\x00", "a\x00b\xff", "\xed\xa0\x80", strings.Repeat("\x00\xff", 4096)}
	toks := map[stores.KeyRef]stores.Token{}
	for i, k := range keys {
		toks[k] = mustClaim(t, s, req(k, "fp\x00"+k.Key+"\xff", t0), false)
		if err := s.Complete(ctx, k, toks[k], stores.Response{Status: 200 + i, Body: bodies[i%len(bodies)]}); err != nil {
			t.Fatalf("Complete(%q): %v", k, err)
		}
	}
	for i, k := range keys {
		d := begin(t, s, req(k, "fp\x00"+k.Key+"\xff", t0.Add(time.Second)))
		want := stores.Response{Status: 200 + i, Body: bodies[i%len(bodies)]}
		if d.Outcome != stores.Replay || d.Response != want {
			t.Errorf("key %q: %v %q, want replay of %q", k, d.Outcome, d.Response.Body, want.Body)
		}
		// A fingerprint differing after a NUL is a different fingerprint.
		wantOutcome(t, begin(t, s, req(k, "fp\x00"+k.Key+"\xfe", t0.Add(time.Second))), stores.Mismatch)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM idempotency_keys`).Scan(&n); err != nil || n != len(keys) {
		t.Fatalf("%d rows (%v), want one per key (%d)", n, err, len(keys))
	}
	var bad int
	if err := s.db.QueryRow(`SELECT count(*) FROM idempotency_keys WHERE typeof(tenant) != 'blob' OR typeof(key) != 'blob' OR typeof(fingerprint) != 'blob' OR typeof(resp_body) != 'blob'`).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("%d rows not stored as BLOBs (%v)", bad, err)
	}
}

// TestCrashInsideBegin: a client that crashes at the failpoint inside Begin's
// transaction leaves nothing half-written: no claim, no takeover, and the
// write lock is free again.
func TestCrashInsideBegin(t *testing.T) {
	p := dbPath(t)
	s := openAt(t, p, "")
	crash := faults.WithHandler(context.Background(), faults.HandlerFunc(func(_ context.Context, name string) error {
		if name == faults.BeginBeforeCommit {
			return faults.ErrCrashed
		}
		return nil
	}))
	k := key("crash")
	if d, err := s.Begin(crash, req(k, "fp", t0)); !errors.Is(err, faults.ErrCrashed) {
		t.Fatalf("Begin under a crash = %+v, %v; want ErrCrashed", d, err)
	}
	if n := rowCount(t, s, k); n != 0 {
		t.Fatalf("a crashed claim left %d rows", n)
	}
	// The same crash during a takeover leaves the old claim and its token.
	old := mustClaim(t, s, req(k, "fp", t0), false)
	if _, err := s.Begin(crash, req(k, "fp", t0.Add(lockTTL))); !errors.Is(err, faults.ErrCrashed) {
		t.Fatalf("takeover under a crash: %v, want ErrCrashed", err)
	}
	if err := s.Complete(context.Background(), k, old, stores.Response{Status: 200, Body: "old owner"}); err != nil {
		t.Fatalf("the crashed takeover changed the token: %v", err)
	}
	// Nothing is left locked: a write from another store on the file goes through.
	other := openAt(t, p, "")
	// A lock left held fails the write at the busy timeout; this bound
	// is past it, so load cannot fail a write that went through.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := other.Begin(ctx, req(key("after"), "fp", t0)); err != nil {
		t.Fatalf("write after the crash: %v", err)
	}
}

// TestCancelInsideBegin: a caller whose context ends inside Begin's
// transaction (here just before the commit) gets an error, nothing is
// written, and the store's next write transaction, on the same writer
// connection, goes through.
func TestCancelInsideBegin(t *testing.T) {
	s := open(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx = faults.WithHandler(ctx, faults.HandlerFunc(func(_ context.Context, name string) error {
		if name == faults.BeginBeforeCommit {
			cancel()
		}
		return nil
	}))
	k := key("cancel")
	if d, err := s.Begin(ctx, req(k, "fp", t0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin cancelled before its commit = %+v, %v; want context.Canceled", d, err)
	}
	if n := rowCount(t, s, k); n != 0 {
		t.Fatalf("a cancelled claim left %d rows", n)
	}
	for i := range 3 {
		if tok := mustClaim(t, s, req(key(fmt.Sprint("after-", i)), "fp", t0), false); tok == "" {
			t.Fatal("no token")
		}
	}
	if n := rowCount(t, s, k); n != 0 {
		t.Fatalf("the cancelled claim was committed by a later one: %d rows", n)
	}
}

func TestPrune(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	// Rows created at t0, t0+1m, …; one done, the rest in flight.
	for i := range 5 {
		k := key(string(rune('a' + i)))
		tok := mustClaim(t, s, req(k, "fp", t0.Add(time.Duration(i)*time.Minute)), false)
		if i == 0 {
			if err := s.Complete(ctx, k, tok, stores.Response{Status: 200}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A takeover does not renew the key's age: created_at stays.
	mustClaim(t, s, req(key("b"), "fp", t0.Add(retention/2)), true)
	steps := []struct {
		now  time.Time
		want int
	}{
		{t0.Add(retention - time.Nanosecond), 0},
		{t0.Add(retention), 1}, // created_at <= now - Retention: exactly at the edge goes
		{t0.Add(retention + time.Minute + 30*time.Second), 1},
		{t0.Add(retention + 10*time.Minute), 3},
		{t0.Add(retention + 10*time.Minute), 0},
	}
	for _, st := range steps {
		n, err := s.Prune(ctx, st.now)
		if err != nil || n != st.want {
			t.Fatalf("Prune(%v) = %d, %v; want %d", st.now.Sub(t0), n, err, st.want)
		}
	}
	// A pruned key is new again (that is why retention must outlast retries).
	mustClaim(t, s, req(key("a"), "other", t0.Add(2*retention)), false)
}

// TestPruneBatches: more rows than one batch are all pruned and counted.
func TestPruneBatches(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	n := 2*pruneBatch + 17
	for i := range n {
		if _, err := tx.Exec(correct.claim, s.args(key(fmt.Sprintf("k%06d", i)),
			sql.Named("fingerprint", []byte("fp")), sql.Named("now", t0.UnixNano()), sql.Named("token", "t"))...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Prune(ctx, t0.Add(retention))
	if err != nil || got != n {
		t.Fatalf("Prune = %d, %v; want %d", got, err, n)
	}
}

func TestTimeRange(t *testing.T) {
	s := open(t, "")
	ctx := context.Background()
	for _, now := range []time.Time{{}, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, err := s.Begin(ctx, req(key("k"), "fp", now)); err == nil || !strings.Contains(err.Error(), "outside the storable range") {
			t.Errorf("Begin at %v = %v, want a range error", now, err)
		}
		if _, err := s.Prune(ctx, now); err == nil {
			t.Errorf("Prune at %v succeeded", now)
		}
	}
	// Sub-millisecond precision is kept: the LockTTL edge is exact.
	at := t0.Add(time.Microsecond + 7)
	mustClaim(t, s, req(key("ns"), "fp", at), false)
	wantOutcome(t, begin(t, s, req(key("ns"), "fp", at.Add(lockTTL-1))), stores.InFlight)
	mustClaim(t, s, req(key("ns"), "fp", at.Add(lockTTL)), true)
	// A clock that goes backwards is in flight, never stale.
	mustClaim(t, s, req(key("back"), "fp", t0), false)
	wantOutcome(t, begin(t, s, req(key("back"), "fp", t0.Add(-time.Hour))), stores.InFlight)
}

// TestContextCancelled: a cancelled context fails the call and writes nothing.
func TestContextCancelled(t *testing.T) {
	s := open(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Begin(ctx, req(key("k"), "fp", t0)); err == nil {
		t.Fatal("Begin with a cancelled context succeeded")
	}
	if n := rowCount(t, s, key("k")); n != 0 {
		t.Fatalf("cancelled Begin left %d rows", n)
	}
}

// TestCloseTwice: closing again is harmless.
func TestCloseTwice(t *testing.T) {
	s, err := New(context.Background(), dbPath(t), testConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBusyBeginIsAnsweredByTheRow: a Begin whose write finds no turn
// within the busy timeout (its Store's writer held by another call, as in
// a pile-up of writers) wrote nothing, and is answered from a read of the
// key when the row settles it: a 409 on another store's live claim, a
// replay once it is saved; only a key the read cannot decide (absent)
// fails with ErrBusy. Such Begins once failed behind a claim that had
// long committed, and a correct store failed --strict-availability at
// --keys 50 on a loaded machine.
func TestBusyBeginIsAnsweredByTheRow(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	owner := openAt(t, path, "correct")
	s, err := newStore(ctx, path, testConfig("correct"), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	mustClaim(t, owner, req(key("live"), "fp", t0), false)
	tok := mustClaim(t, owner, req(key("saved"), "fp", t0), false)
	if err := owner.Complete(ctx, key("saved"), tok, stores.Response{Status: 201, Body: "ok"}); err != nil {
		t.Fatal(err)
	}
	s.writer <- struct{}{} // another call's write holds this Store's turn
	defer func() { <-s.writer }()
	later := t0.Add(time.Second)
	if got, err := s.Begin(ctx, req(key("live"), "fp", later)); err != nil || got.Outcome != stores.InFlight {
		t.Errorf("Begin behind a held writer, on a live claim: %v, %v; want a 409", got, err)
	}
	if got, err := s.Begin(ctx, req(key("saved"), "fp", later)); err != nil || got.Outcome != stores.Replay || got.Response.Body != "ok" {
		t.Errorf("Begin behind a held writer, on a saved key: %v, %v; want the replay", got, err)
	}
	if got, err := s.Begin(ctx, req(key("absent"), "fp", later)); !errors.Is(err, ErrBusy) {
		t.Errorf("Begin behind a held writer, on an absent key: %v, %v; want ErrBusy", got, err)
	}
}
