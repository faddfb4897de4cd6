//go:build race

package harnesstest

import (
	"os"
	"testing"

	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/stores"
)

// Under -race harnesstest provisions the in-process and file backends
// only: the server backends, Docker and the drivers are not linked (see
// the package comment), and their tests run in make test's plain pass.

// shareServers runs the tests: there are no servers to share.
func shareServers(run func() int) int { return run() }

// addrForTest is where t finds b's data: a fresh temporary directory for
// a file store, nothing for an in-process one. A server backend has no
// server under -race: it skips t, or fails it where servers are required
// (IDEM_REQUIRE_SERVERS=1, as make test sets in CI), so a server test
// that lands in the race pass is never silently left out.
func addrForTest(t testing.TB, b stores.Backend) string {
	t.Helper()
	switch b.Lives {
	case stores.Server:
		msg := "harnesstest: " + b.Name + " needs a server, and under -race none is provisioned: test it without -race (make test's other pass)"
		if os.Getenv("IDEM_REQUIRE_SERVERS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	case stores.File:
		return t.TempDir()
	}
	return ""
}

// network is never asked for under -race (no server backend).
func network(string) nemesis.Network { return nil }
