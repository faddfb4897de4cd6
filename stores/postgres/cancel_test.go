package postgres

import (
	"context"
	"net/url"
	"testing"
	"time"
)

// TestCancelledSessionIsNotReused: a session a cancel request was sent on
// (its call's context ended while the statement ran) is closed when the
// call releases it, not handed to the next call, which a late cancel
// would otherwise cancel. Here the pool has one session: the call after
// the cancelled one runs on a new backend.
func TestCancelledSessionIsNotReused(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	ctx := ctxT(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	s, err := New(ctx, u.String(), correctConfig(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pid := func() int32 {
		var p int32
		if err := s.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := pid()
	if pid() != before {
		t.Fatal("the one session of the pool changed between two calls")
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.pool.Exec(short, `SELECT pg_sleep(2)`); err == nil {
		t.Fatal("a 2 s sleep ended inside a 50 ms deadline")
	}
	if after := pid(); after == before {
		t.Errorf("the call after a cancelled one ran on the same backend (%d): a late cancel request would cancel it", before)
	}
}
