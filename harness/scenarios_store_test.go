package harness

import (
	"context"
	"testing"

	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	redisstore "github.com/idemcheck/idemcheck/stores/redis"
)

// serverOptions runs scenarios on a server container of this test (so it
// can be paused and restarted), with this binary as the worker command.
func serverOptions(t *testing.T, kind servers.Kind, variant string, scenarios ...string) Options {
	t.Helper()
	srv := servers.ForTestOptions(t, kind, servers.Options{Container: true})
	b, err := stores.Lookup(string(kind))
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Backend, o.Variant, o.Scenarios, o.Addr, o.Server = b, variant, scenarios, srv.Addr, srv
	o.WorkerCommand = testWorkerCommand(t)
	return o
}

// TestFaultScenariosOnServers: on Postgres and on Redis (AOF, fsync
// always), the correct store passes workers, store-faults and chaos, with
// every kind of fault really injected.
func TestFaultScenariosOnServers(t *testing.T) {
	for _, kind := range []servers.Kind{servers.Postgres, servers.Redis} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			sum, err := Run(context.Background(), serverOptions(t, kind, stores.Correct, "workers", "store-faults", "chaos"))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][]string{
				"workers":      {FaultWorkerKill},
				"store-faults": {FaultServerPause, FaultServerRestart},
				"chaos":        {"pause", "crash", FaultWorkerKill, FaultServerPause, FaultServerRestart},
			}
			for _, s := range sum.Scenarios {
				logScenario(t, s)
				if s.Verdict != Pass {
					t.Errorf("%s: verdict %s: %s %v", s.Name, s.Verdict, s.Error, s.Violations)
				}
				for _, k := range want[s.Name] {
					if s.Faults[k] == 0 {
						t.Errorf("%s: no %s fault injected (faults %v)", s.Name, k, s.Faults)
					}
				}
				if s.Name == "store-faults" && s.Outcomes["unknown"] == 0 {
					t.Errorf("store-faults: no call ended with an unknown outcome during the outages: %v", s.Outcomes)
				}
			}
		})
	}
}

// TestNoPersistenceKilled: redis-no-persistence loses its claims and
// answers in the restart of store-faults, and a checker says so.
func TestNoPersistenceKilled(t *testing.T) {
	sum, err := Run(context.Background(), serverOptions(t, servers.Redis, redisstore.NoPersistence, "store-faults"))
	if err != nil {
		t.Fatal(err)
	}
	s := sum.Scenarios[0]
	logScenario(t, s)
	if s.Verdict != Fail {
		t.Fatalf("redis-no-persistence survived store-faults: %s %s", s.Verdict, s.Error)
	}
	killers := map[string]bool{}
	for _, v := range s.Violations {
		killers[v.Checker] = true
	}
	if !killers[CheckAtMostOnce] || !killers[CheckLinearizable] {
		t.Errorf("killed by %v; want at least at-most-once (a done key claimed again) and linearizability", killers)
	}
	t.Logf("killed by %v; first: %s", killers, s.Violations[0].Detail)
}
