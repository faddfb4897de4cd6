package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// server is the Postgres server every test of the package shares, from
// harness/servers: IDEM_POSTGRES_DSN when set, else a container. One for the
// package rather than servers.ForTest per test, which would start a
// container for every test; each test isolates itself in a fresh schema.
var (
	serverOnce sync.Once
	server     *servers.Server
	serverErr  error
)

func TestMain(m *testing.M) {
	stop := servers.CloseAllOnSignal()
	code := m.Run()
	if server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := server.Close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		cancel()
	}
	stop()
	os.Exit(code)
}

// testDSN is the DSN of the shared server. When none can be had the test
// is skipped, as servers.ForTest does, or fails when IDEM_REQUIRE_SERVERS=1;
// a server named in the environment that does not answer always fails it.
func testDSN(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		server, serverErr = servers.Start(ctx, servers.Postgres, servers.Options{})
	})
	if serverErr != nil {
		if errors.Is(serverErr, servers.ErrUnavailable) && !servers.Required() {
			t.Skipf("%v (set %s=1 to fail instead of skipping)", serverErr, servers.EnvRequireServers)
		}
		t.Fatalf("%v", serverErr)
	}
	return server.Addr
}

// freshNamespace returns a new schema name and drops that schema when the
// test ends.
func freshNamespace(t testing.TB, dsn string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	ns := "idemtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("cleanup: connect: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{ns}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("cleanup: drop schema %s: %v", ns, err)
		}
	})
	return ns
}

// correctConfig is the correct store's configuration in a fresh
// namespace on the server at dsn, with an hour's LockTTL and retention.
func correctConfig(t testing.TB, dsn string) stores.Config {
	return stores.Config{LockTTL: hour, Retention: hour, Variant: stores.Correct, Namespace: freshNamespace(t, dsn)}
}

// newStore opens a store of the variant in a fresh namespace.
func newStore(t testing.TB, variant string, lockTTL, retention time.Duration) *Store {
	t.Helper()
	dsn := testDSN(t)
	cfg := stores.Config{LockTTL: lockTTL, Retention: retention, Variant: variant, Namespace: freshNamespace(t, dsn)}
	s, err := New(context.Background(), dsn, cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", variant, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ref(key string) stores.KeyRef { return stores.KeyRef{Tenant: "t1", Key: key} }

func req(key, fp string) stores.Request {
	return stores.Request{KeyRef: ref(key), Fingerprint: fp, Now: time.Now()}
}

func mustBegin(t testing.TB, s *Store, r stores.Request) stores.Decision {
	t.Helper()
	d, err := s.Begin(ctxT(t), r)
	if err != nil {
		t.Fatalf("Begin(%q): %v", r.KeyRef.String(), err)
	}
	return d
}

func wantOutcome(t testing.TB, d stores.Decision, want stores.Outcome) {
	t.Helper()
	if d.Outcome != want {
		t.Fatalf("outcome %v, want %v (decision %+v)", d.Outcome, want, d)
	}
}

// barrier is a failpoint handler that holds every caller reaching the named
// failpoint until n callers have, so n clients are inside the same race
// window at once. It gives up after a while rather than hang a test.
func barrier(n int, name string) faults.Handler {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	return faults.HandlerFunc(func(ctx context.Context, fp string) error {
		if fp != name {
			return nil
		}
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return errors.New("barrier: the other clients never arrived")
		}
	})
}

// onFailpoint is a handler that runs f once, when the named failpoint is
// first reached.
func onFailpoint(name string, f func()) faults.Handler {
	var once sync.Once
	return faults.HandlerFunc(func(_ context.Context, fp string) error {
		if fp == name {
			once.Do(f)
		}
		return nil
	})
}

// beginAll runs one Begin per request at once and returns the decisions and
// errors in order.
func beginAll(ctx context.Context, s *Store, reqs []stores.Request, ctxs []context.Context) ([]stores.Decision, []error) {
	ds := make([]stores.Decision, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range reqs {
		c := ctx
		if ctxs != nil && ctxs[i] != nil {
			c = ctxs[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ds[i], errs[i] = s.Begin(c, reqs[i])
		}()
	}
	close(start)
	wg.Wait()
	return ds, errs
}

// rowVersion is the version of key's row (tenant t1): its ctid and xmin,
// which any write of the row changes, even one of the same values.
func rowVersion(t testing.TB, s *Store, key string) string {
	t.Helper()
	var v string
	if err := s.pool.QueryRow(ctxT(t), `SELECT ctid::text || '/' || xmin::text FROM `+s.table+` WHERE tenant = $1 AND key = $2`,
		raw("t1"), raw(key)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
