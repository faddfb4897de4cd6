// Package exampletest finds the runtimes of the example stores in other
// languages (examples/) for tests: node with Debian's sqlite3 module,
// python3 with redis. Shared by every test that runs an example, so they
// find a runtime, and skip or fail without it, alike.
package exampletest

import (
	"os"
	"os/exec"
	"testing"
)

// NodePath is the NODE_PATH under which node finds its sqlite3 module:
// the environment's, else where scripts/node-sqlite3.sh puts Debian's
// node-sqlite3 when node does not find it by itself.
func NodePath() string {
	if p := os.Getenv("NODE_PATH"); p != "" {
		return p
	}
	return "/usr/local/lib/idemcheck/node"
}

// NeedRuntime runs name with arg (and env added to the environment), a
// probe of the example's runtime, and skips t when it fails, or fails t
// when required (IDEM_REQUIRE_SERVERS=1: CI installs the runtimes, .ci/run,
// and must not skip).
func NeedRuntime(t testing.TB, required bool, env []string, name string, arg ...string) {
	t.Helper()
	cmd := exec.Command(name, arg...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		msg := name + " cannot run the example: " + err.Error() + ": " + string(out)
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set IDEM_REQUIRE_SERVERS=1 to fail instead of skipping)")
	}
}
