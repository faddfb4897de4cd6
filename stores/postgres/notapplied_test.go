package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemcheck/idemcheck/stores"
)

// TestRolledBackIsNotApplied: a call the server rolled back as a whole
// (a serialization failure, 40001, or a deadlock, 40P01) returns
// stores.ErrNotApplied with the server's message kept, and indeed changed
// nothing: the owner's save then lands. A trigger on the store's table
// makes the server answer with the code.
func TestRolledBackIsNotApplied(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	s := newStore(t, stores.Correct, hour, hour)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	fn := pgx.Identifier{s.cfg.Namespace, "refuse"}.Sanitize()
	resp := stores.Response{Status: 201, Body: "charged"}
	for _, code := range []string{"40001", "40P01"} {
		k := ref("k-" + code)
		a := mustBegin(t, s, req(k.Key, "fp"))
		for _, q := range []string{
			`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '` + code + `'; END $$`,
			`CREATE TRIGGER refuse BEFORE UPDATE ON ` + s.table + ` FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		err := s.Complete(ctx, k, a.Token, resp)
		if !errors.Is(err, stores.ErrNotApplied) || !strings.Contains(err.Error(), code) || !strings.Contains(err.Error(), "refused by the test") {
			t.Errorf("Complete refused with %s: %v, want ErrNotApplied with the server's message", code, err)
		}
		if _, err := conn.Exec(ctx, `DROP FUNCTION `+fn+`() CASCADE`); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, k, a.Token, resp); err != nil {
			t.Errorf("Complete after the refused one: %v, want it saved (the refused one changed nothing)", err)
		}
	}
}
