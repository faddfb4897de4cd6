package execstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/internal/exampletest"
	"github.com/idemcheck/idemcheck/stores"
)

// exampleVerdicts runs the correct store on race and sched-race (both must
// pass) and its select-then-insert variant on sched-race (it must fail,
// through its failpoint begin.after-select).
func exampleVerdicts(t *testing.T, f idemtest.Factory) {
	t.Helper()
	run := func(variant, scenario string, want check.Verdict) {
		g := f
		g.Open = func(cfg stores.Config) (stores.Store, error) {
			cfg.Variant = variant
			return f.Open(cfg)
		}
		if f.OpenAt != nil { // the scheduled episodes open their own
			g.OpenAt = func(addr string, cfg stores.Config) (stores.Store, error) {
				cfg.Variant = variant
				return f.OpenAt(addr, cfg)
			}
		}
		sum, dir, err := idemtest.CheckScenario(context.Background(), g, scenario)
		if err != nil {
			t.Fatalf("%s on %s: %v", scenario, variant, err)
		}
		s := sum.Scenarios[0]
		if s.Verdict != want {
			t.Errorf("%s on %s %s: %s, want %s (report: %s)", scenario, f.Name, variant, s.Verdict, want, dir)
			for _, v := range s.Violations {
				t.Logf("%s on %s: %s", v.Checker, v.Key, v.Detail)
			}
			return
		}
		os.RemoveAll(dir)
	}
	run(stores.Correct, "race", check.Pass)
	run(stores.Correct, "sched-race", check.Pass)
	run("select-then-insert", "sched-race", check.Fail)
}

// TestExampleJSSQLite: the lesson card's store in JavaScript over SQLite,
// through the protocol in a real node process.
func TestExampleJSSQLite(t *testing.T) {
	t.Parallel() // a store process, files or server, and a name of its own
	env := []string{"NODE_PATH=" + exampletest.NodePath()}
	exampletest.NeedRuntime(t, servers.Required(), env, "node", "-e", `require("sqlite3")`)
	script, err := filepath.Abs("../../examples/exec-js-sqlite/store.js")
	if err != nil {
		t.Fatal(err)
	}
	f, err := idemtest.Exec(context.Background(), "node "+script, env, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	exampleVerdicts(t, f)
}

// TestExamplePythonRedis: the Python store over Redis, through the
// protocol in a real python3 process, on a Redis server of the test's.
func TestExamplePythonRedis(t *testing.T) {
	t.Parallel() // a store process, files or server, and a name of its own
	exampletest.NeedRuntime(t, servers.Required(), nil, "/usr/bin/python3", "-c", "import redis")
	addr := servers.ForTest(t, servers.Redis).Addr
	script, err := filepath.Abs("../../examples/exec-py-redis/store.py")
	if err != nil {
		t.Fatal(err)
	}
	f, err := idemtest.Exec(context.Background(), "/usr/bin/python3 "+script, nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	exampleVerdicts(t, f)
}
