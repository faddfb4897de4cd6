package harness

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// TestChaosPlanFromSeed: the chaos schedule is a pure function of the seed
// and the round: the same seed gives the same faults, another seed others,
// and which scenarios ran before does not matter.
func TestChaosPlanFromSeed(t *testing.T) {
	env := func(seed int64, tenant string, used int) *Env {
		e := &Env{Seed: seed, Tenant: tenant, rand: newTestRand()}
		for i := 0; i < used; i++ {
			e.rand.Int63() // as if other scenarios drew from the run's PRNG
		}
		return e
	}
	ttl := 250 * time.Millisecond
	a := chaosPlan(planRand(env(7, "t0", 0), "chaos"), ttl, 6)
	b := chaosPlan(planRand(env(7, "t0", 99), "chaos"), ttl, 6)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a, b)
	}
	if c := chaosPlan(planRand(env(8, "t0", 0), "chaos"), ttl, 6); reflect.DeepEqual(a, c) {
		t.Error("seeds 7 and 8 drew the same schedule")
	}
	if c := chaosPlan(planRand(env(7, "t1", 0), "chaos"), ttl, 6); reflect.DeepEqual(a, c) {
		t.Error("rounds 0 and 1 drew the same schedule")
	}
	kinds := map[string]int{}
	for _, ev := range a {
		kinds[ev.Kind]++
		if ev.At < 0 || ev.At > chaosWindow*ttl {
			t.Errorf("%v starts outside the faults phase", ev)
		}
	}
	for _, k := range []string{chaosClientPause, chaosClientCrash, chaosWorkerKill, chaosWorkerKillAt, chaosServerPause, chaosServerRestart} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the schedule %v", k, a)
		}
	}
}

// TestChaosMemory: on the memory store only the client faults are
// possible; the others are listed as skipped, with the reason, and the
// correct store passes.
func TestChaosMemory(t *testing.T) {
	b, _ := stores.Lookup("memory")
	o := DefaultOptions()
	o.Backend, o.Scenarios = b, []string{"chaos"}
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	s := sum.Scenarios[0]
	logScenario(t, s)
	if s.Verdict != Pass {
		t.Fatalf("verdict %s: %s %v", s.Verdict, s.Error, s.Violations)
	}
	if s.Faults["pause"] != 2 || s.Faults["crash"] != 2 {
		t.Errorf("faults %v, want the 2 planned client pauses and 2 crashes", s.Faults)
	}
	skipped := 0
	for _, l := range s.Schedule {
		if contains(l, "(skipped: ") {
			skipped++
		}
	}
	if skipped == 0 {
		t.Errorf("no fault listed as skipped on the memory store: %v", s.Schedule)
	}
}
