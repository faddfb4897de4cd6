// Package harnesstest sets up harness runs for tests: run options for a
// backend with its data provisioned (a temporary directory for SQLite, a
// Postgres or Redis server from harness/servers), the fault tools that go
// with a server this test started, and the test binary as the worker
// process. It is imported by tests only: it brings in Docker and the
// database drivers, except under -race, where it provisions only the
// in-process and file backends (race.go): make test runs the server
// backends' tests without -race, and keeps the race pass's test binaries
// free of Docker and the drivers, whose instrumented build was about half
// of the race pass's compiling on a fresh machine (docs/performance.md).
package harnesstest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/worker"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory" // registered backends, as the CLI links them
	_ "github.com/idemcheck/idemcheck/stores/sqlite" // (the servers' in servers.go)
)

// Main is a test binary's TestMain body for tests that start worker
// processes: started as a worker (worker.EnvVar set), the binary runs
// worker.Main instead of its tests. The tests share one server of each
// kind that Options provisions (servers.RunSharing; none under -race).
// Call it as
//
//	func TestMain(m *testing.M) { harnesstest.Main(m) }
func Main(m *testing.M) {
	if os.Getenv(worker.EnvVar) == "1" {
		os.Exit(worker.Main(context.Background(), os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(shareServers(m.Run))
}

// WorkerCommand is the worker command of this test binary (see Main).
func WorkerCommand(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}
}

// Options are the default run options on the named backend, its data
// provisioned for t (servers.AddrForTest: a server from the environment
// or a container the test binary's tests share, skipped or failed as
// servers.ForTest says when none can be had; under -race a server
// backend skips t), with network proxies in front of a server, and this
// test binary as the worker command (the test package's TestMain must
// call Main).
func Options(t testing.TB, backend string, variant string, scenarios ...string) harness.Options {
	t.Helper()
	b, err := stores.Lookup(backend)
	if err != nil {
		t.Fatal(err)
	}
	o := harness.DefaultOptions()
	o.Backend, o.Variant, o.Scenarios = b, variant, scenarios
	o.Addr = addrForTest(t, b)
	if b.Lives == stores.Server {
		o.Net = network(backend)
		o.NoServer = "the test's server may come from the environment: use harnesstest.ServerOptions to pause and restart it"
	}
	o.WorkerCommand = WorkerCommand(t)
	return o
}

// RunOne runs o (one scenario named in it), logs the result (see Log)
// and returns it; a run that cannot be set up fails the test.
func RunOne(t testing.TB, o harness.Options) results.ScenarioResult {
	t.Helper()
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Scenarios) == 0 {
		t.Fatalf("no scenario ran: %v", o.Scenarios)
	}
	s := sum.Scenarios[0]
	Log(t, s)
	return s
}

// Log logs a scenario's result: verdict, counts, schedule, and the
// checkers that did not pass.
func Log(t testing.TB, s results.ScenarioResult) {
	t.Helper()
	t.Logf("%s: %s, %d ops, faults %v, outcomes %v, %.1fs %s", s.Name, s.Verdict, s.Ops, s.Faults, s.Outcomes, s.Seconds, s.Error)
	for _, l := range s.Schedule {
		t.Logf("  schedule: %s", l)
	}
	for _, c := range s.Checkers {
		if c.Verdict != check.Pass {
			t.Logf("  %s: %s: %s", c.Checker, c.Verdict, c.Detail)
		}
	}
}

// KeepOnFailure writes the run's results directory (report.md, traces,
// history.jsonl) under $IDEM_RESULTS (default: the system's temporary
// directory) when t fails, and logs where: a failing test leaves its
// evidence behind.
func KeepOnFailure(t testing.TB, sum *results.Summary) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() || sum == nil {
			return
		}
		root := os.Getenv("IDEM_RESULTS")
		if root == "" {
			root = filepath.Join(os.TempDir(), "idemcheck-tests")
		}
		dir, err := report.PrepareRunDir(root, sum.Store, sum.Variant, time.Now())
		if err == nil {
			err = dir.Write(sum)
		}
		if err != nil {
			t.Logf("could not keep the results: %v", err)
			return
		}
		t.Logf("results kept in %s", dir.Path)
	})
}
