//go:build !race

package harnesstest

import (
	"context"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/postgres" // registered backends,
	_ "github.com/idemcheck/idemcheck/stores/redis"    // as the CLI links them
)

// shareServers runs a test binary's tests sharing one server of each
// kind (servers.RunSharing).
func shareServers(run func() int) int { return servers.RunSharing(run) }

// addrForTest is where t finds b's data (servers.AddrForTest).
func addrForTest(t testing.TB, b stores.Backend) string {
	t.Helper()
	return servers.AddrForTest(t, b.Name)
}

// network is the proxies in front of the named backend's server.
func network(backend string) nemesis.Network { return servers.Network(backend) }

// ServerOptions are Options on a Postgres or Redis container that this
// test started (never one from the environment), so the harness can also
// pause, kill and restart it.
func ServerOptions(t testing.TB, kind servers.Kind, variant string, scenarios ...string) harness.Options {
	t.Helper()
	srv := servers.ForTestOptions(t, kind, servers.Options{Container: true})
	b, err := stores.Lookup(string(kind))
	if err != nil {
		t.Fatal(err)
	}
	o := harness.DefaultOptions()
	o.Backend, o.Variant, o.Scenarios, o.Addr = b, variant, scenarios, srv.Addr
	o.Net = servers.Network(string(kind))
	f, err := servers.NewFaults(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	o.Server = f
	o.WorkerCommand = WorkerCommand(t)
	return o
}

// OwnServer is an Options.OwnServer for tests: each call starts a
// container of kind (never the environment's server) with its faults, and
// its Close removes it.
func OwnServer(kind servers.Kind) func(ctx context.Context) (*harness.OwnedServer, error) {
	return func(ctx context.Context) (*harness.OwnedServer, error) {
		srv, err := servers.Start(ctx, kind, servers.Options{Container: true})
		if err != nil {
			return nil, err
		}
		closeSrv := func() {
			cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = srv.Close(cctx)
		}
		f, err := servers.NewFaults(srv)
		if err != nil {
			closeSrv()
			return nil, err
		}
		return &harness.OwnedServer{Addr: srv.Addr, Net: servers.Network(string(kind)), Server: f,
			Close: func() { f.Close(); closeSrv() }}, nil
	}
}

// ReplicatedOptions are the default run options on a replicated backend
// (postgres-replicated, redis-replicated) with a topology this test
// started (servers.TopologyForTest): its router's address, its failover
// and partition faults, and network proxies in front of the router.
func ReplicatedOptions(t testing.TB, backend string, variant string, scenarios ...string) harness.Options {
	t.Helper()
	b, err := stores.Lookup(backend)
	if err != nil {
		t.Fatal(err)
	}
	if b.Replicated == "" {
		t.Fatalf("%s is not a replicated backend", backend)
	}
	top := servers.TopologyForTest(t, servers.Kind(b.Replicated))
	o := harness.DefaultOptions()
	o.Backend, o.Variant, o.Scenarios, o.Addr, o.Cluster = b, variant, scenarios, top.Addr, top
	o.Net = servers.Network(b.Replicated)
	o.NoServer = "the store is replicated: its server faults are the failover and partition scenarios"
	o.WorkerCommand = WorkerCommand(t)
	return o
}
