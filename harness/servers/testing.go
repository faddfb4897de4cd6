package servers

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// testSignals installs CloseAllOnSignal once per test binary, so that a
// Ctrl-C during `go test` still removes the containers.
var testSignals sync.Once

// ForTest starts a server of kind for t (see Start) and closes it when t
// ends. When Docker or the image is missing it skips t with the reason,
// unless IDEM_REQUIRE_SERVERS=1, when it fails t; a server named in the
// environment that does not answer always fails t.
func ForTest(t testing.TB, kind Kind) *Server {
	t.Helper()
	return ForTestOptions(t, kind, Options{})
}

// ForTestOptions is ForTest with Options (e.g. Container: true for a test
// that must control the server). opts.Logf defaults to t.Logf.
func ForTestOptions(t testing.TB, kind Kind, opts Options) *Server {
	t.Helper()
	testSignals.Do(func() { CloseAllOnSignal() })
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, kind, opts)
	if err != nil {
		if errors.Is(err, ErrUnavailable) && !Required() {
			t.Skipf("%v (set %s=1 to fail instead of skipping)", err, EnvRequireServers)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("%v", err)
		}
	})
	return s
}

// AddrForTest returns where a test finds the data of the named backend: a
// fresh temporary directory for sqlite, nothing for memory, and a running
// server's address (ForTest: skipped or failed as ForTest says when none can
// be had) for postgres and redis.
func AddrForTest(t testing.TB, backend string) string {
	t.Helper()
	switch {
	case Kind(backend).Known():
		return ForTest(t, Kind(backend)).Addr
	case backend == "sqlite":
		return t.TempDir()
	}
	return ""
}

// TopologyForTest starts a replicated topology of kind for t
// (StartReplicated) and removes it when t ends; it skips or fails as
// ForTest does when Docker or the image is missing.
func TopologyForTest(t testing.TB, kind Kind) *Topology {
	t.Helper()
	testSignals.Do(func() { CloseAllOnSignal() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	top, err := StartReplicated(ctx, kind, Options{Logf: t.Logf})
	if err != nil {
		if errors.Is(err, ErrUnavailable) && !Required() {
			t.Skipf("%v (set %s=1 to fail instead of skipping)", err, EnvRequireServers)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := top.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return top
}
