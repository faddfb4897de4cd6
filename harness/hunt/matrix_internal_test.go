package hunt

import (
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/redis"
)

// A survivor is hunted again with a longer LockTTL only where the LockTTL
// was shortened for the hunt: a scheduled scenario on a server-clock store.
func TestLongerLockTTLHelpsOnlyScheduledServerHunts(t *testing.T) {
	for _, c := range []struct {
		backend, scenario string
		want              bool
	}{
		{"redis", "sched-race", true},
		{"redis", "race", false},
		{"memory", "sched-race", false},
		{"redis", "no-such-scenario", false},
	} {
		b, err := stores.Lookup(c.backend)
		if err != nil {
			t.Fatal(err)
		}
		o := harness.DefaultOptions()
		o.Backend = b
		if got := longerLockTTLHelps(o, c.scenario); got != c.want {
			t.Errorf("%s on %s: %v, want %v", c.scenario, c.backend, got, c.want)
		}
	}
	if LoadedServerLockTTL <= ScheduledServerLockTTL {
		t.Errorf("LoadedServerLockTTL %v is not longer than %v", LoadedServerLockTTL, ScheduledServerLockTTL)
	}
}
