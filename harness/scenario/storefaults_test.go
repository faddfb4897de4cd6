//go:build !race

// Servers only: under -race harnesstest provisions none (see its package comment).

package scenario_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	redisstore "github.com/idemcheck/idemcheck/stores/redis"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// TestFaultScenariosOnServers: on Postgres and on Redis (AOF, fsync
// always), the correct store passes workers, store-faults and chaos, with
// every kind of fault really injected. On Redis the server-fault scenarios
// run each on a server of its own (Options.OwnServer); on Postgres the
// second server cannot start, so they run alone on the run's server, and
// the summary says why. A scheduled scenario (sched-race) runs beside the
// servers of their own, not after them: each own server is closed only
// once sched-race has started.
func TestFaultScenariosOnServers(t *testing.T) {
	for _, kind := range []servers.Kind{servers.Postgres, servers.Redis} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			o := harnesstest.ServerOptions(t, kind, stores.Correct, "workers", "store-faults", "chaos", "sched-race")
			own := kind == servers.Redis
			if own {
				schedStarted := make(chan struct{})
				var once sync.Once
				o.Progress = func(p harness.Progress) {
					if p.Scenario == "sched-race" {
						once.Do(func() { close(schedStarted) })
					}
				}
				start := harnesstest.OwnServer(kind)
				o.OwnServer = func(ctx context.Context) (*harness.OwnedServer, error) {
					srv, err := start(ctx)
					if err != nil {
						return nil, err
					}
					closeSrv := srv.Close
					srv.Close = func() {
						select {
						case <-schedStarted:
						case <-time.After(time.Minute):
							t.Errorf("sched-race had not started a minute after a server-fault scenario ended on its own server: the scheduled phase waits for them")
						}
						closeSrv()
					}
					return srv, nil
				}
			} else {
				o.OwnServer = func(context.Context) (*harness.OwnedServer, error) {
					return nil, errors.New("no second server in this test")
				}
			}
			sum, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			harnesstest.KeepOnFailure(t, sum)
			if own == (sum.OwnServerError != "") {
				t.Errorf("OwnServerError %q with a second server that can start: %v", sum.OwnServerError, own)
			}
			if len(sum.Scenarios) != 4 {
				t.Fatalf("%d scenarios ran, want 4", len(sum.Scenarios))
			}
			want := map[string][]history.FaultKind{
				"workers":      {history.FaultWorkerKill},
				"store-faults": {history.FaultServerPause, history.FaultServerRestart},
				"chaos":        {history.FaultPause, history.FaultCrash, history.FaultWorkerKill, history.FaultServerPause, history.FaultServerRestart},
			}
			for _, s := range sum.Scenarios {
				harnesstest.Log(t, s)
				if wantOwn := own && s.Name != "workers" && s.Name != "sched-race"; s.OwnServer != wantOwn {
					t.Errorf("%s: OwnServer %v, want %v", s.Name, s.OwnServer, wantOwn)
				}
				if s.Verdict != check.Pass {
					t.Errorf("%s: verdict %s: %s %v", s.Name, s.Verdict, s.Error, s.Violations)
				}
				for _, k := range want[s.Name] {
					// The run says so among its schedule's lines (Env.Note).
					if s.Faults[string(k)] == 0 && !(clientFault(k) && saysNotInjected(append(slices.Clone(s.Notes), s.Schedule...))) {
						t.Errorf("%s: no %s fault injected, and the run does not say why (faults %v, notes %q)", s.Name, k, s.Faults, s.Notes)
					}
				}
				// A network window that hit no traffic tested nothing, and
				// the run says so among its notes (Env.NotTested): on
				// Postgres chaos's latency window used to hit nothing,
				// unsaid, in every default run.
				for _, k := range nemesis.NetKinds {
					if s.Faults[string(history.NetFault(k))] > 0 && s.Faults[k] == 0 && !saysNoTraffic(s.Notes, k) {
						t.Errorf("%s: a %s window hit no traffic, and the run does not say so (faults %v, notes %q)", s.Name, k, s.Faults, s.Notes)
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
	s := harnesstest.RunOne(t, harnesstest.ServerOptions(t, servers.Redis, redisstore.NoPersistence, "store-faults"))
	if s.Verdict != check.Fail {
		t.Fatalf("redis-no-persistence survived store-faults: %s %s", s.Verdict, s.Error)
	}
	killers := map[string]bool{}
	for _, v := range s.Violations {
		killers[v.Checker] = true
	}
	if !killers[check.AtMostOnce] || !killers[check.Linearizable] {
		t.Errorf("killed by %v; want at least at-most-once (a done key claimed again) and linearizability", killers)
	}
	t.Logf("killed by %v; first: %s", killers, s.Violations[0].Detail)
}

// clientFault reports whether k is a fault armed at a client's failpoint
// (chaos arms them on an order's key, for whichever client reaches it).
func clientFault(k history.FaultKind) bool {
	return k == history.FaultPause || k == history.FaultCrash
}

// saysNoTraffic reports whether a scenario's notes say that its
// network fault of kind hit no traffic.
func saysNoTraffic(notes []string, kind string) bool {
	return slices.ContainsFunc(notes, func(n string) bool {
		return strings.Contains(n, "the "+kind+" fault") && strings.Contains(n, "hit no traffic")
	})
}

// saysNotInjected reports whether a scenario's notes say that a client
// fault it planned was not injected: under load the order's work may run
// only once the faults are healed (CI at load 20 saw a planned pause
// never reached), and the run must say so rather than leave it unsaid.
func saysNotInjected(notes []string) bool {
	for _, n := range notes {
		if strings.Contains(n, "was not injected") {
			return true
		}
	}
	return false
}
