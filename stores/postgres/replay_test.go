package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemcheck/idemcheck/stores"
)

// TestReplayOnlyReads: a replay leaves the row's version as it was (same
// ctid and xmin: no UPDATE, not even one writing the same values), through
// the session's function and, for a role that may not make temporary
// objects or a session that lost the function, through the function's two
// statements sent one by one; the other decisions are the same on every
// path.
func TestReplayOnlyReads(t *testing.T) {
	t.Run("function", func(t *testing.T) {
		s := newStore(t, stores.Correct, hour, hour)
		if s.plainBegin.Load() {
			t.Fatal("the superuser's sessions could not make Begin's function")
		}
		replayOnlyReads(t, s)
	})
	t.Run("a session that lost the function", func(t *testing.T) {
		// One connection, whose function is dropped: as a pooler in
		// transaction mode hands the store a server session it never made
		// the function in.
		u, err := url.Parse(testDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("pool_max_conns", "1")
		u.RawQuery = q.Encode()
		cfg := stores.Config{LockTTL: hour, Retention: hour, Variant: stores.Correct, Namespace: freshNamespace(t, testDSN(t))}
		s, err := New(context.Background(), u.String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.pool.Exec(ctxT(t), `DROP FUNCTION pg_temp.idemcheck_begin(bytea, bytea, bytea, interval, timestamptz)`); err != nil {
			t.Fatal(err)
		}
		replayOnlyReads(t, s)
		if s.plainBegin.Load() {
			t.Fatal("a lost function turned the store to plainBegin for good")
		}
	})
	t.Run("no TEMPORARY privilege", func(t *testing.T) {
		dsn := noTempRole(t, testDSN(t))
		cfg := stores.Config{LockTTL: hour, Retention: hour, Variant: stores.Correct, Namespace: "idemtest_notemp"}
		s, err := New(context.Background(), dsn, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		replayOnlyReads(t, s)
		if !s.plainBegin.Load() {
			t.Fatal("a role without TEMPORARY made Begin's function")
		}
	})
}

func replayOnlyReads(t *testing.T, s *Store) {
	ctx := ctxT(t)
	c := mustBegin(t, s, req("k", "fp"))
	wantOutcome(t, c, stores.Claimed)
	wantOutcome(t, mustBegin(t, s, req("k", "fp")), stores.InFlight)
	wantOutcome(t, mustBegin(t, s, req("k", "other")), stores.Mismatch)
	resp := stores.Response{Status: 201, Body: "ch_1\x00\xff"}
	if err := s.Complete(ctx, ref("k"), c.Token, resp); err != nil {
		t.Fatal(err)
	}
	version := func() string {
		var v string
		if err := s.pool.QueryRow(ctx, `SELECT ctid::text || '/' || xmin::text FROM `+s.table+` WHERE tenant = $1 AND key = $2`,
			raw("t1"), raw("k")).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := version()
	for range 20 {
		d := mustBegin(t, s, req("k", "fp"))
		wantOutcome(t, d, stores.Replay)
		if d.Response != resp || d.Token != "" {
			t.Fatalf("replay %+v, want %+v and no token", d, resp)
		}
	}
	if after := version(); after != before {
		t.Fatalf("replays rewrote the row: version %s, then %s", before, after)
	}
	wantOutcome(t, mustBegin(t, s, req("k", "other")), stores.Mismatch)
}

// noTempRole makes a database and a role that may connect and create in
// it but not make temporary objects (TEMPORARY revoked from PUBLIC there),
// drops both when the test ends, and returns the role's DSN.
func noTempRole(t *testing.T, dsn string) string {
	t.Helper()
	ctx := ctxT(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "idemtest_notemp_" + hex.EncodeToString(b[:])
	id := pgx.Identifier{name}.Sanitize()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{
		`CREATE ROLE ` + id + ` LOGIN PASSWORD 'pw'`,
		`CREATE DATABASE ` + id + ` OWNER postgres`,
		`REVOKE TEMPORARY ON DATABASE ` + id + ` FROM PUBLIC`,
		`GRANT CONNECT, CREATE ON DATABASE ` + id + ` TO ` + id,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer c.Close(ctx)
		for _, q := range []string{`DROP DATABASE IF EXISTS ` + id + ` WITH (FORCE)`, `DROP ROLE IF EXISTS ` + id} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Errorf("cleanup: %s: %v", q, err)
			}
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("the server's DSN %q is not a URL: %v", dsn, err)
	}
	u.User = url.UserPassword(name, "pw")
	u.Path = "/" + name
	return u.String()
}
