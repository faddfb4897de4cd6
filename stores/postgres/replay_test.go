package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/internal/seen"
)

// TestReplayOnlyReads: a replay leaves the row's version as it was (same
// ctid and xmin: no UPDATE, not even one writing the same values), through
// Begin's function in the store's schema, through the function each
// session makes when the role may not make one in the schema, and through
// the function's statements sent one by one, for a role that may make
// neither or a store whose function was dropped under it; the other
// decisions are the same on every path.
func TestReplayOnlyReads(t *testing.T) {
	t.Run("the schema's function", func(t *testing.T) {
		s := newStore(t, stores.Correct, hour, hour)
		wantPath(t, s, "schema")
		replayOnlyReads(t, s)
	})
	t.Run("the function dropped under the store", func(t *testing.T) {
		s := newStore(t, stores.Correct, hour, hour)
		dropBeginFunc(t, s)
		replayOnlyReads(t, s)
		wantPath(t, s, "schema") // each call that needed the function found none, and sent the two statements
	})
	for _, c := range []struct {
		name          string
		temporary     bool
		dropFunc      bool
		want          string
		wantFuncAfter bool
	}{
		{"a role that may only use the table", true, true, "session", false},
		{"a role that may only use the table, without TEMPORARY", false, true, "plain", false},
		{"a role that may only use the table and the function a migration made", false, false, "schema", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := tableOnlyRole(t, testDSN(t), c.temporary, c.dropFunc)
			s, err := New(context.Background(), dsn, stores.Config{LockTTL: hour, Retention: hour, Variant: stores.Correct, Namespace: tableOnlyNamespace})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			wantPath(t, s, c.want)
			replayOnlyReads(t, s)
			if got := beginFuncExists(t, s); got != c.wantFuncAfter {
				t.Errorf("the schema has Begin's function: %v, want %v (the role may not create there)", got, c.wantFuncAfter)
			}
		})
	}
}

// wantPath fails unless Begin goes the way named: "schema" (the schema's
// function), "session" (each session's) or "plain" (two statements).
func wantPath(t *testing.T, s *Store, want string) {
	t.Helper()
	got := "schema"
	switch {
	case s.plainBegin.Load():
		got = "plain"
	case s.sessionFunc.Load():
		got = "session"
	}
	if got != want {
		t.Fatalf("Begin goes through %q, want %q", got, want)
	}
	wantCall := s.sql.callFunc
	if got == "session" {
		wantCall = s.sql.callSession
	}
	if got != "plain" && s.beginCall() != wantCall {
		t.Fatalf("Begin calls %q, want %q", s.beginCall(), wantCall)
	}
}

// beginFuncExists says whether s's schema has s's Begin function.
func beginFuncExists(t *testing.T, s *Store) bool {
	t.Helper()
	var ok bool
	if err := s.pool.QueryRow(ctxT(t), `SELECT to_regprocedure($1) IS NOT NULL`, s.sql.funcName+beginFuncArgs).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// dropBeginFunc drops s's Begin function from its schema.
func dropBeginFunc(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.pool.Exec(ctxT(t), `DROP FUNCTION `+s.sql.funcName+beginFuncArgs); err != nil {
		t.Fatal(err)
	}
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
	version := func() string { return rowVersion(t, s, "k") }
	before := version()
	for range 20 {
		d := mustBegin(t, s, req("k", "fp"))
		wantOutcome(t, d, stores.Replay)
		if d.Response != resp || d.Token != "" {
			t.Fatalf("replay %+v, want %+v and no token", d, resp)
		}
	}
	// Replays by a Store that has not seen the key (another process's):
	// its claim goes first and finds the row.
	s.seen = seen.New()
	for range 2 {
		wantOutcome(t, mustBegin(t, s, req("k", "fp")), stores.Replay)
	}
	if after := version(); after != before {
		t.Fatalf("replays rewrote the row: version %s, then %s", before, after)
	}
	wantOutcome(t, mustBegin(t, s, req("k", "other")), stores.Mismatch)
}

// tableOnlyNamespace is the schema tableOnlyRole's database holds.
const tableOnlyNamespace = "idemtest_tableonly"

// tableOnlyRole makes a database whose schema tableOnlyNamespace a
// superuser's store made, and a role that may only connect and read and
// write the store's table there: no CREATE on the database or the schema,
// and, unless temporary, no temporary objects (TEMPORARY revoked from
// PUBLIC). With dropFunc, the schema's Begin function is dropped, so the
// role finds none and may not make one. It drops both when the test
// ends, and returns the role's DSN.
func tableOnlyRole(t *testing.T, dsn string, temporary, dropFunc bool) string {
	t.Helper()
	ctx := ctxT(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "idemtest_role_" + hex.EncodeToString(b[:])
	id := pgx.Identifier{name}.Sanitize()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
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
	qs := []string{`CREATE ROLE ` + id + ` LOGIN PASSWORD 'pw'`, `CREATE DATABASE ` + id + ` OWNER postgres`}
	if !temporary {
		qs = append(qs, `REVOKE TEMPORARY ON DATABASE `+id+` FROM PUBLIC`)
	}
	qs = append(qs, `GRANT CONNECT ON DATABASE `+id+` TO `+id)
	for _, q := range qs {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	in := func(u *url.URL, user *url.Userinfo) string {
		c := *u
		c.User, c.Path = user, "/"+name
		return c.String()
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("the server's DSN %q is not a URL: %v", dsn, err)
	}
	// The schema, the table and Begin's function, as a migration run by
	// a superuser would make them.
	owner, err := New(ctx, in(u, u.User), stores.Config{LockTTL: hour, Retention: hour, Variant: stores.Correct, Namespace: tableOnlyNamespace})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if dropFunc {
		dropBeginFunc(t, owner)
	}
	sch := pgx.Identifier{tableOnlyNamespace}.Sanitize()
	for _, q := range []string{
		`REVOKE CREATE ON SCHEMA ` + sch + ` FROM PUBLIC`,
		`GRANT USAGE ON SCHEMA ` + sch + ` TO ` + id,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ` + owner.table + ` TO ` + id,
	} {
		if _, err := owner.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return in(u, url.UserPassword(name, "pw"))
}
