package hunt

import (
	"slices"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/nemesis"
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

// aCluster is a replicated topology that is never faulted: the jobs'
// split asks only whether there is one.
type aCluster struct{ nemesis.Cluster }

// TestFailoverHuntsRunAlone: on a replicated store the failover and
// partition jobs, which fail over or cut the cluster every other hunt
// shares, run alone after the others; the rest run at once. Beside the
// other hunts, the failed primary broke their statements, and mutants
// stopped, exit 2.
func TestFailoverHuntsRunAlone(t *testing.T) {
	o := harness.DefaultOptions()
	o.Cluster = aCluster{}
	jobs := []Job{{Scenario: "sched-race"}, {Scenario: "failover"}, {Scenario: "race"}, {Scenario: "partition"}}
	shared, alone := splitAlone(o, jobs)
	if !slices.Equal(shared, []int{0, 2}) || !slices.Equal(alone, []int{1, 3}) {
		t.Fatalf("shared %v, alone %v: want the failover and partition jobs alone", shared, alone)
	}
}

// A kill's shrinking ends when --shrink has passed since its hunt began,
// but a late kill still shrinks for a third of it: the latest hunt is the
// matrix's tail, and a whole --shrink after it was all tail.
func TestShrinkBudgetBoundsALateKill(t *testing.T) {
	for _, c := range []struct{ hunted, want time.Duration }{
		{0, 3 * time.Second},
		{300 * time.Millisecond, 2700 * time.Millisecond},
		{2 * time.Second, time.Second},
		{4300 * time.Millisecond, time.Second},
	} {
		if got := shrinkBudget(3*time.Second, c.hunted); got != c.want {
			t.Errorf("killed after %v: shrinks %v, want %v", c.hunted, got, c.want)
		}
	}
}
