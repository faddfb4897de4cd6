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

// A hunt after one checker does not stop at a kill by others alone; if no
// round fails the wanted checker, the first other kill is reported, with
// the episodes the whole hunt ran.
func TestHuntWantsTheListedChecker(t *testing.T) {
	h := Options{Want: "at-most-once"}
	var fallback *Kill
	k := &Kill{Killed: true, Checker: "linearizability", Checkers: []string{"linearizability"}, Detail: "first"}
	if h.settle(k, &fallback) || k.Killed || fallback == nil || fallback.Detail != "first" {
		t.Fatalf("a kill by linearizability alone ended a hunt after at-most-once: %+v, fallback %+v", k, fallback)
	}
	*k = Kill{Killed: true, Checker: "linearizability", Checkers: []string{"linearizability"}, Detail: "second"}
	h.settle(k, &fallback)
	if fallback.Detail != "first" {
		t.Errorf("the fallback is not the first kill: %q", fallback.Detail)
	}
	k.Episodes, k.Seconds = 7, 90
	restore(k, fallback)
	if !k.Killed || k.Detail != "first" || k.Episodes != 7 || k.Seconds != 90 {
		t.Errorf("restored: %+v", k)
	}
	k = &Kill{Killed: true, Checker: "linearizability", Checkers: []string{"linearizability", "at-most-once"}}
	if !h.settle(k, &fallback) || !k.Killed {
		t.Errorf("a kill naming at-most-once did not end the hunt")
	}
	if !(Options{}).settle(&Kill{Killed: true, Checkers: []string{"x"}}, new(*Kill)) {
		t.Errorf("a hunt after no checker did not stop at a kill")
	}
}
