package scenario_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// The plans of runs on the server backends: here, not among harness's
// tests, whose race pass links no server backend (harnesstest).

// TestOwnServerPlan: the server-fault scenarios leave the alone phase for
// a server of their own only when the run can start one and scenarios may
// run at once: the estimate drops by their time then, and not with
// --parallel 1 (one after another means one after another).
func TestOwnServerPlan(t *testing.T) {
	b, err := stores.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	estimate := func(parallel int, own bool) time.Duration {
		o := harness.DefaultOptions()
		o.Backend, o.Addr, o.Server, o.Parallel = b, "postgres://unused", fakeServer{}, parallel
		o.Scenarios = []string{"race", "retention", "store-faults", "chaos"}
		if own {
			o.OwnServer = func(context.Context) (*harness.OwnedServer, error) { return nil, errors.New("unused") }
		}
		return o.Estimate()
	}
	if with, without := estimate(4, true), estimate(4, false); with >= without {
		t.Errorf("--parallel 4: %v with a server of their own, %v without: want less", with, without)
	}
	if with, without := estimate(1, true), estimate(1, false); with != without {
		t.Errorf("--parallel 1: %v with a server of their own, %v without: want the same", with, without)
	}
}

// TestScheduledPlan: the forecast runs the scheduled scenarios as Run
// does: side by side on a server-clock store (less than their sum, at the
// default keys, whose slots fit the budget), one after another on a
// caller-clock one (their sum).
func TestScheduledPlan(t *testing.T) {
	scheduled := harnesstest.ScheduledNames()
	for _, tc := range []struct {
		backend    string
		sideBySide bool
	}{{"redis", true}, {"sqlite", false}} {
		b, err := stores.Lookup(tc.backend)
		if err != nil {
			t.Fatal(err)
		}
		o := harness.DefaultOptions()
		o.Backend, o.Addr, o.Scenarios = b, "unused", scheduled
		var sum time.Duration
		for _, name := range scheduled {
			sc, _ := scenario.Lookup(name)
			sum += o.ScenarioCost(sc)
		}
		est := o.Estimate()
		if tc.sideBySide && est >= sum {
			t.Errorf("%s: forecast %v, the scenarios' sum %v: want less, side by side", tc.backend, est, sum)
		}
		if !tc.sideBySide && est != sum {
			t.Errorf("%s: forecast %v, want the scenarios' sum %v, one after another", tc.backend, est, sum)
		}
	}
}
