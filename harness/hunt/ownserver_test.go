//go:build !race

// Servers only: under -race harnesstest provisions none (see its package comment).

package hunt_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
	redisstore "github.com/idemcheck/idemcheck/stores/redis"
)

// untouchable is the shared server of a hunt that must not fault it:
// every fault fails the test.
type untouchable struct {
	nemesis.Server
	t *testing.T
}

func (u untouchable) Pause(context.Context) error {
	u.t.Error("the shared server was paused")
	return nil
}

func (u untouchable) Restart(context.Context) (time.Duration, error) {
	u.t.Error("the shared server was restarted")
	return 0, nil
}

// TestFaultingHuntsRunOnAServerOfTheirOwn: a hunt of a mutant whose
// scenario pauses and restarts the server (redis-no-persistence, by
// store-faults) runs on a server of its own when the run can start one,
// and never faults the server other hunts share. `idemcheck mutants`
// hunted it on the shared server beside the correct store's runs: the
// restart, with persistence turned off server-wide, erased their done
// keys, and the correct store failed at-most-once in 4 runs of 6.
func TestFaultingHuntsRunOnAServerOfTheirOwn(t *testing.T) {
	o := harnesstest.ServerOptions(t, servers.Redis, stores.Correct)
	o.Server = untouchable{Server: o.Server, t: t}
	var started atomic.Int32
	own := harnesstest.OwnServer(servers.Redis)
	o.OwnServer = func(ctx context.Context) (*harness.OwnedServer, error) {
		started.Add(1)
		return own(ctx)
	}
	k, err := hunt.Hunt(context.Background(), o, redisstore.NoPersistence, hunt.Options{Budget: 20 * time.Second, MinEpisodes: 3, Keys: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !k.Killed {
		t.Errorf("%s survived store-faults on a server of its own: %+v", redisstore.NoPersistence, k)
	}
	if started.Load() != 1 {
		t.Errorf("%d servers of its own started, want 1", started.Load())
	}
	sc, _ := scenario.Lookup("store-faults")
	if !o.FaultsItsServer(sc) {
		t.Error("store-faults does not say it faults the run's server")
	}
}
