package nemesis_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/stores"
)

// TestChaosPlanFromSeed: the chaos schedule is a pure function of the
// seed, the scenario and the round: the same seed gives the same faults,
// another seed, round or scenario others.
func TestChaosPlanFromSeed(t *testing.T) {
	ttl := 250 * time.Millisecond
	a := nemesis.ChaosPlan(nemesis.Rand(7, "chaos", 0), ttl, 6)
	b := nemesis.ChaosPlan(nemesis.Rand(7, "chaos", 0), ttl, 6)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a, b)
	}
	if c := nemesis.ChaosPlan(nemesis.Rand(8, "chaos", 0), ttl, 6); reflect.DeepEqual(a, c) {
		t.Error("seeds 7 and 8 drew the same schedule")
	}
	if c := nemesis.ChaosPlan(nemesis.Rand(7, "chaos", 1), ttl, 6); reflect.DeepEqual(a, c) {
		t.Error("rounds 0 and 1 drew the same schedule")
	}
	if c := nemesis.ChaosPlan(nemesis.Rand(7, "store-faults", 0), ttl, 6); reflect.DeepEqual(a, c) {
		t.Error("two scenarios drew the same schedule")
	}
	kinds := map[string]int{}
	for _, ev := range a {
		kinds[ev.Kind]++
		if ev.At < 0 || ev.At > nemesis.ChaosWindow*ttl {
			t.Errorf("%v starts outside the faults phase", ev)
		}
	}
	for _, k := range []string{nemesis.ChaosClientPause, nemesis.ChaosClientCrash, nemesis.ChaosWorkerKill, nemesis.ChaosWorkerKillAt, nemesis.ChaosServerPause, nemesis.ChaosServerRestart} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the schedule %v", k, a)
		}
	}
}

// TestKillListUnfired: a kill fires once, at its failpoint on its key, and
// Unfired lists the armed kills no worker reached, so a round can say
// what it did not interrupt.
func TestKillListUnfired(t *testing.T) {
	l := nemesis.NewKillList()
	a, b := stores.KeyRef{Tenant: "t", Key: "a"}, stores.KeyRef{Tenant: "t", Key: "b"}
	l.Arm(faults.RunAfterClaim, a)
	l.Arm(faults.RunAfterWork, b)
	if got := l.Decide(nil, faults.RunAfterClaim, b); got.Kill {
		t.Error("killed at an armed failpoint on another key")
	}
	if got := l.Decide(nil, faults.RunAfterClaim, a); !got.Kill {
		t.Error("not killed at an armed failpoint on its key")
	}
	if got := l.Decide(nil, faults.RunAfterClaim, a); got.Kill {
		t.Error("killed twice by one armed kill")
	}
	want := []string{faults.RunAfterWork + " on " + b.String()}
	if got := l.Unfired(); !reflect.DeepEqual(got, want) {
		t.Errorf("Unfired: %q, want %q", got, want)
	}
}

// TestChaosPlanFitsItsWindow: on every seed every timed fault starts
// inside the faults phase, and the server's restart half a LockTTL or
// more before its end, so the load meets the restarted server inside it.
func TestChaosPlanFitsItsWindow(t *testing.T) {
	for _, ttl := range []time.Duration{time.Millisecond, 250 * time.Millisecond, 2 * time.Minute} {
		w := nemesis.ChaosWindow * ttl
		for seed := int64(1); seed <= 2000; seed++ {
			for _, ev := range nemesis.ChaosPlan(nemesis.Rand(seed, "chaos", 0), ttl, 6) {
				if ev.At < 0 || ev.At > w {
					t.Fatalf("seed %d, LockTTL %v: %v starts outside the %v faults phase", seed, ttl, ev, w)
				}
				if ev.Kind == nemesis.ChaosServerRestart && ev.At > w-ttl/2 {
					t.Fatalf("seed %d, LockTTL %v: %v leaves less than half a LockTTL of the %v faults phase", seed, ttl, ev, w)
				}
			}
		}
	}
}
