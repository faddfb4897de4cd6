package scenario_test

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// TestSkipReasons: each fault scenario says why it cannot run without
// what it needs, and runs when it has it.
func TestSkipReasons(t *testing.T) {
	pg, _ := stores.Lookup("postgres")
	sq, _ := stores.Lookup("sqlite")
	mem, _ := stores.Lookup("memory")
	rd, _ := stores.Lookup("redis")
	pgr, _ := stores.Lookup("postgres-replicated")
	for _, tc := range []struct {
		name string
		skip func(scenario.Caps) string
		caps scenario.Caps
		want string // "" must run
	}{
		{"server faults on sqlite", scenario.ServerSkip, scenario.Caps{Backend: sq}, "embedded"},
		{"server faults without control", scenario.ServerSkip, scenario.Caps{Backend: pg, Addr: "postgres://x"}, "no server control"},
		{"server faults on a server from the environment", scenario.ServerSkip, scenario.Caps{Backend: pg, NoServer: "the postgres server comes from the environment"}, "environment"},
		{"network on memory", scenario.NetSkip, scenario.Caps{Backend: mem}, "memory is embedded"},
		{"network without a proxy maker", scenario.NetSkip, scenario.Caps{Backend: pg, Addr: "postgres://x", OpenAt: pg.Open}, "no network proxy"},
		{"network on a factory without an address", scenario.NetSkip, scenario.Caps{Factory: true}, "factory"},
		{"workers on memory", scenario.WorkersSkip, scenario.Caps{Backend: mem, WorkerCommand: []string{"x"}}, "one process"},
		{"workers on a factory", scenario.WorkersSkip, scenario.Caps{Backend: sq, Factory: true, WorkerCommand: []string{"x"}}, "factory"},
		{"workers without a command", scenario.WorkersSkip, scenario.Caps{Backend: sq}, "worker command"},
		{"workers on sqlite", scenario.WorkersSkip, scenario.Caps{Backend: sq, WorkerCommand: []string{"x"}}, ""},
		{"failover on memory", scenario.ClusterSkip, scenario.Caps{Backend: mem}, "memory store is not replicated"},
		{"failover on sqlite", scenario.ClusterSkip, scenario.Caps{Backend: sq, Addr: "/tmp/x"}, "sqlite store is not replicated"},
		{"failover on one redis server", scenario.ClusterSkip, scenario.Caps{Backend: rd, Addr: "127.0.0.1:6379"}, "redis store is not replicated"},
		{"failover on a factory", scenario.ClusterSkip, scenario.Caps{Factory: true, Addr: "127.0.0.1:6379"}, "factory store is not replicated"},
		{"failover on a replicated store without its topology", scenario.ClusterSkip, scenario.Caps{Backend: pgr, Addr: "postgres://x"}, "no replicated topology"},
	} {
		got := tc.skip(tc.caps)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPhases: the scheduled scenarios run apart from the rest, the ones
// that pause the server run alone, and chaos runs alone only where it
// pauses the server.
func TestPhases(t *testing.T) {
	pg, _ := stores.Lookup("postgres")
	mem, _ := stores.Lookup("memory")
	withServer := scenario.Caps{Backend: pg, Server: fakeServer{}}
	embedded := scenario.Caps{Backend: mem}
	for _, tc := range []struct {
		name string
		caps scenario.Caps
		want scenario.Phase
	}{
		{"race", withServer, scenario.Shared},
		{"network", withServer, scenario.Shared},
		{"workers", withServer, scenario.Shared},
		{"sched-race", embedded, scenario.Scheduled},
		{"store-faults", withServer, scenario.Alone},
		{"failover", withServer, scenario.Alone},
		{"stress", embedded, scenario.Alone},
		{"chaos", withServer, scenario.Alone},
		{"chaos", embedded, scenario.Shared},
	} {
		sc, ok := scenario.Lookup(tc.name)
		if !ok {
			t.Fatalf("no scenario %s", tc.name)
		}
		if got := sc.Phase(tc.caps); got != tc.want {
			t.Errorf("%s on %s: phase %d, want %d", tc.name, tc.caps.Backend.Name, got, tc.want)
		}
	}
}

// fakeServer is a nemesis.Server that is never called: Phase only asks
// whether the run has one.
type fakeServer struct{ nemesis.Server }
