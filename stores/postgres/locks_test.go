package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemcheck/idemcheck/stores"
)

// Begin beside another session's row lock: what waits for it, and what
// does not.

// TestTimeoutIsAnError: a Begin that cannot finish in time (here, a
// takeover waiting on a row lock another session holds) returns an error,
// never a guessed outcome; so does Complete. And the timed-out statements
// were cancelled on the server: they do not land later, when the lock is
// gone (with pgx's default handling they would: the timed-out Complete
// used to mark the key done behind its caller's back). The claim is stale
// when the Begin comes: a live one is answered 409 by a read, which waits
// for no row lock.
func TestTimeoutIsAnError(t *testing.T) {
	const ttl = 100 * time.Millisecond
	s := newStore(t, stores.Correct, ttl, hour)
	ctx := ctxT(t)
	d := mustBegin(t, s, req("locked", "fp"))
	time.Sleep(2 * ttl)

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{s.cfg.Namespace, "idempotency_keys"}.Sanitize()+" WHERE key = $1 FOR UPDATE", []byte("locked")); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	got, err := s.Begin(short, req("locked", "fp"))
	if err == nil || got != (stores.Decision{}) {
		t.Fatalf("Begin under a held row lock past its deadline: %+v, %v; want an error and no decision", got, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the error does not wrap DeadlineExceeded: %v", err)
	}
	short2, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if err := s.Complete(short2, ref("locked"), d.Token, stores.Response{Status: 200}); err == nil || errors.Is(err, stores.ErrFenced) {
		t.Errorf("Complete past its deadline: %v, want a non-fencing error", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The claim is intact: the timed-out Complete did not land later.
	if err := s.Complete(ctx, ref("locked"), d.Token, stores.Response{Status: 200}); err != nil {
		t.Errorf("Complete after the lock is gone: %v", err)
	}
}

// TestAnswersThatOnlyRead: a 409 on a live claim, a 422 on another
// fingerprint and a replay are each decided by the read alone, with no row
// lock: they come back while another session holds the row's lock, which
// a write (a claim, a takeover, the upsert) would wait for.
func TestAnswersThatOnlyRead(t *testing.T) {
	s := newStore(t, stores.Correct, hour, hour)
	ctx := ctxT(t)
	mustBegin(t, s, req("live", "fp"))
	done := mustBegin(t, s, req("done", "fp"))
	if err := s.Complete(ctx, ref("done"), done.Token, stores.Response{Status: 201, Body: "saved"}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{s.cfg.Namespace, "idempotency_keys"}.Sanitize()+" WHERE key IN ($1, $2) FOR UPDATE",
		[]byte("live"), []byte("done")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, fp string
		want    stores.Outcome
	}{{"live", "fp", stores.InFlight}, {"live", "other", stores.Mismatch}, {"done", "other", stores.Mismatch}, {"done", "fp", stores.Replay}} {
		// A bound, not a pace: an answer that waits for the lock never
		// comes, and one from the read comes at once; 15 s (under ctxT's
		// 20 s) leaves a loaded machine (CI) room, at a cost only to a
		// failing run.
		short, cancel := context.WithTimeout(ctx, 15*time.Second)
		d, err := s.Begin(short, req(c.key, c.fp))
		cancel()
		if err != nil {
			t.Fatalf("Begin(%s, %s) under another session's row lock: %v; want %v from the read", c.key, c.fp, err, c.want)
		}
		wantOutcome(t, d, c.want)
	}
}
