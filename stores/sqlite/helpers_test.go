package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// The configuration of every test store, and the time tests start at.
var (
	lockTTL   = 10 * time.Second
	retention = time.Hour
	t0        = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
)

func testConfig(variant string) stores.Config {
	return stores.Config{LockTTL: lockTTL, Retention: retention, Variant: variant}
}

// dbPath is a fresh database file in the test's temporary directory.
func dbPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "idem.db")
}

// openAt opens a store of variant on path, closed when the test ends.
func openAt(t testing.TB, path, variant string) *Store {
	t.Helper()
	s, err := New(context.Background(), path, testConfig(variant))
	if err != nil {
		t.Fatalf("New(%s): %v", variant, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// open opens a store of variant on a fresh file.
func open(t testing.TB, variant string) *Store {
	t.Helper()
	return openAt(t, dbPath(t), variant)
}

func key(k string) stores.KeyRef { return stores.KeyRef{Tenant: "acme", Key: k} }

func req(k stores.KeyRef, fp string, now time.Time) stores.Request {
	return stores.Request{KeyRef: k, Fingerprint: fp, Now: now}
}

func begin(t testing.TB, s stores.Store, r stores.Request) stores.Decision {
	t.Helper()
	d, err := s.Begin(context.Background(), r)
	if err != nil {
		t.Fatalf("Begin(%s, %q, %v): %v", r.KeyRef, r.Fingerprint, r.Now, err)
	}
	return d
}

// mustClaim begins and requires a claim (a takeover when takeover is set).
func mustClaim(t testing.TB, s stores.Store, r stores.Request, takeover bool) stores.Token {
	t.Helper()
	d := begin(t, s, r)
	if d.Outcome != stores.Claimed || d.Takeover != takeover || d.Token == "" {
		t.Fatalf("Begin(%s at %v) = %+v, want claimed (takeover %v) with a token", r.KeyRef, r.Now, d, takeover)
	}
	return d.Token
}

func wantOutcome(t testing.TB, d stores.Decision, want stores.Outcome) {
	t.Helper()
	if d.Outcome != want {
		t.Fatalf("outcome = %v (%+v), want %v", d.Outcome, d, want)
	}
}

// rowCount is how many rows the key has in the file (0 or 1).
func rowCount(t testing.TB, s *Store, k stores.KeyRef) int {
	t.Helper()
	var n int
	err := s.db.QueryRow(`SELECT count(*) FROM idempotency_keys WHERE tenant = ? AND key = ?`,
		blob(k.Tenant), blob(k.Key)).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
