package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
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
	s := startForTest(t, kind, opts, 2*time.Minute)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("%v", err)
		}
	})
	return s
}

// startForTest starts a server of kind for t within timeout; when Docker
// or the image is missing it skips t, unless servers are required
// (Required), and any other error fails t.
func startForTest(t testing.TB, kind Kind, opts Options, timeout time.Duration) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := Start(ctx, kind, opts)
	if err != nil {
		if errors.Is(err, ErrUnavailable) && !Required() {
			t.Skipf("%v (set %s=1 to fail instead of skipping)", err, EnvRequireServers)
		}
		t.Fatalf("%v", err)
	}
	return s
}

// AddrForTest returns where a test finds the data of the named backend: a
// fresh temporary directory for sqlite, nothing for memory, and a running
// server's address (SharedForTest: skipped or failed as ForTest says when
// none can be had) for postgres and redis.
func AddrForTest(t testing.TB, backend string) string {
	t.Helper()
	switch {
	case Kind(backend).Known():
		return SharedForTest(t, Kind(backend)).Addr
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

// shared holds the servers SharedForTest hands out while RunSharing runs
// a test binary's tests: at most one per kind, started by the first test
// that asks for it.
var shared struct {
	on    atomic.Bool
	mu    sync.Mutex // held while a server starts, so that tests wait for the one start
	kinds map[Kind]*Server
}

// RunSharing runs a test binary's tests (run is its m.Run) with
// SharedForTest serving each kind of server from one container for all
// of them, and removes those containers once the tests have ended. It
// returns run's exit code. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(servers.RunSharing(m.Run)) }
func RunSharing(run func() int) int {
	shared.on.Store(true)
	code := run()
	shared.on.Store(false)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for kind, s := range shared.kinds {
		if err := s.Close(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "servers: removing the tests' shared %s server: %v\n", kind, err)
			if code == 0 {
				code = 1
			}
		}
		delete(shared.kinds, kind)
	}
	return code
}

// SharedForTest is ForTest for a test that only uses the server (never
// pauses, kills or restarts it; ForTestOptions with Container: true is
// for that) and keeps its data apart from other tests' (every harness run
// and store keeps its own namespace, as on a server named in the
// environment, which all tests already share). Under RunSharing one
// server of kind serves the whole test binary, started by the first test
// that asks: each container start cost the suite 1.5 to 4 CPU-seconds of
// a 2-core machine (the container's, the Docker daemon's, the waiting
// test's) and took up to 14 s in a loaded suite. Outside RunSharing it
// is ForTest. It skips or fails t as ForTest does.
func SharedForTest(t testing.TB, kind Kind) *Server {
	t.Helper()
	if !shared.on.Load() {
		return ForTest(t, kind)
	}
	testSignals.Do(func() { CloseAllOnSignal() })
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if s := shared.kinds[kind]; s != nil {
		return s
	}
	s := startForTest(t, kind, Options{}, defaultStartTimeout)
	t.Logf("servers: %s, shared by this binary's tests", s)
	if shared.kinds == nil {
		shared.kinds = map[Kind]*Server{}
	}
	shared.kinds[kind] = s
	return s
}
