package main

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/scenario"
)

// The random-flag soak (soak --random-flags) is a property test of the
// harness itself: every flag a user may set is drawn from its allowed
// range together with the seed, and a correct store must pass every
// draw. A draw is bounded by what one run may cost on this machine, so
// that a draw of the largest values is still a run that ends: the
// scenarios whose forecast (harness.Options.ScenarioCost,
// EstimateCalls) exceeds the budget are dropped from it, the costliest
// first; the ranges themselves are the CLI's (harness.MinLockTTL …).

// drawBudget bounds one drawn run: its forecast wall time and the store
// calls it may record (harness.BytesPerCall each: 200,000 calls are
// about 1 GB).
type drawBudget struct {
	Time  time.Duration
	Calls int64
}

// logUniform draws from [lo, hi] with every order of magnitude alike
// likely: as many draws near 50 ms as near 10 min.
func logUniform(r *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo)))
}

// drawOptions draws the flags of one run on base's store from r: the seed,
// --lock-ttl, --retention, --keys, --clients, --count, --parallel, --duration and a
// subset of the scenarios, each over its allowed range (and, from the
// seed, --strict-availability and --strict-retention), then drops
// scenarios until the run fits the budget. It returns the options and
// the command line that runs the same (nil options when no scenario of
// the draw fits: the caller draws again).
func drawOptions(r *rand.Rand, base harness.Options, budget drawBudget) (*harness.Options, string) {
	o := base
	o.Seed = 1 + r.Int63n(1_000_000)
	// The strict modes are flags a user may set too (a correct store must
	// pass them): taken from the seed, not drawn, so that a draw seed
	// draws the other flags it drew before they were added.
	o.StrictAvailability = o.Seed%3 == 0
	o.StrictRetention = o.Seed%5 == 0
	o.LockTTL = time.Duration(logUniform(r, float64(harness.MinLockTTL), float64(harness.MaxLockTTL))).Round(time.Millisecond)
	o.Keys = int(logUniform(r, 1, harness.MaxKeys))
	o.Clients = int(logUniform(r, 1, harness.MaxClients))
	o.Count = 1 + r.Intn(3)
	o.Parallel = int(logUniform(r, 1, harness.MaxParallel))
	o.Duration = 0
	if r.Intn(4) == 0 {
		o.Duration = time.Duration(1+r.Intn(5)) * time.Second
	}
	o.Retention = time.Duration(logUniform(r, float64(harness.MinRetention), float64(harness.MaxRetention))).Round(time.Millisecond)
	all := scenario.Default()
	if len(base.Scenarios) > 0 {
		all = base.Scenarios // --scenario bounds the draw (it drew from every one)
	}
	var names []string
	for _, n := range all {
		if r.Intn(2) == 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		names = []string{all[r.Intn(len(all))]}
	}
	caps := o.Caps()
	names = slices.DeleteFunc(names, func(n string) bool {
		sc, _ := scenario.Lookup(n)
		return sc.WhyNot(caps) != ""
	})
	for len(names) > 0 {
		o.Scenarios = names
		if o.Estimate() <= budget.Time && o.EstimateCalls() <= budget.Calls {
			break
		}
		// Drop the costliest (time, then calls) and try again.
		worst, worstCost := 0, time.Duration(-1)
		for i, n := range names {
			sc, _ := scenario.Lookup(n)
			one := o
			one.Scenarios = []string{n}
			c := o.ScenarioCost(sc) + time.Duration(one.EstimateCalls())*time.Microsecond
			if c > worstCost {
				worst, worstCost = i, c
			}
		}
		names = slices.Delete(names, worst, worst+1)
	}
	if len(names) == 0 {
		return nil, ""
	}
	o.Scenarios = names
	cmd := fmt.Sprintf("idemcheck check --store %s --scenario %s --seed %d --lock-ttl %v --retention %v --keys %d --clients %d --count %d --parallel %d",
		o.Backend.Name, strings.Join(names, ","), o.Seed, o.LockTTL, o.Retention, o.Keys, o.Clients, o.Count, o.Parallel)
	if o.Duration > 0 {
		cmd += fmt.Sprintf(" --duration %v", o.Duration)
	}
	if o.StrictRetention {
		cmd += " --strict-retention"
	}
	if o.StrictAvailability {
		cmd += " --strict-availability"
	}
	return &o, cmd
}
