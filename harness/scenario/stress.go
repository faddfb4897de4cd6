package scenario

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// The stress scenario drives the store near its own capacity, with every
// call recorded and checked as in any other scenario: the checkers then
// judge a history made at the rate a retry storm would make it. It runs
// only when named (--scenario stress); `all` leaves it out, since its
// history is as large as the store is fast.
//
// Bounds: one round calibrates for stressCalibrate and drives for
// stressWindow (--duration runs more rounds), and stops sending new orders
// once the round has recorded stressMaxOps calls, so a fast store cannot
// exhaust the machine's memory.
const (
	stressCalibrate = 500 * time.Millisecond
	stressWindow    = 2 * time.Second
	stressMaxOps    = 400_000
)

// runStress: first the store's capacity is measured with the run's client
// count calling it directly (see measureCapacity: nothing recorded, in a
// tenant of its own); then the same number of
// clients, in pairs sending the same orders at the same moment (one
// claims, the other gets 409 and retries into a replay), run orders one
// after another on fresh keys for stressWindow, recorded. The findings say
// the rate reached, the capacity, and the ratio in percent; below
// stressGoal percent the schedule notes that the harness, not the store,
// was the bottleneck.
func runStress(ctx context.Context, env *Env) {
	n := max(env.Clients, 2)
	capacity := measureCapacity(ctx, env, n, stressCalibrate)
	start := env.Hist.OpCount()
	t0 := time.Now()
	deadline := t0.Add(stressWindow)
	pairs := (n + 1) / 2
	parallel(n, func(i int) {
		c := env.NewClient()
		c.WorkTime, c.Backoff, c.MaxBackoff = 0, 200*time.Microsecond, env.Config.LockTTL/10
		env.ApplyWorkload(c)
		// Clients 2p and 2p+1 are pair p: both send orders p, p+pairs,
		// p+2·pairs, …, in the same order.
		for j := 0; ctx.Err() == nil && time.Now().Before(deadline); j++ {
			if env.Hist.OpCount()-start >= stressMaxOps {
				return
			}
			c.Submit(ctx, env.Order(stressOrder(i/2, j, pairs), ""))
		}
	})
	took := time.Since(t0)
	calls := env.Hist.OpCount() - start
	rate := int(float64(calls) / took.Seconds())
	env.FindingMean("stress_calls_per_s", rate)
	env.FindingMean("stress_capacity_calls_per_s", int(capacity))
	if capacity <= 0 {
		// A loaded machine, or a store that answered nothing while it
		// was measured: no share to give, and no silence about it.
		env.NotTested("%s: the store answered no call in the %v its capacity was measured for: the share of it the harness drove is not known", env.Tenant, stressCalibrate)
	}
	if capacity > 0 {
		pct := int(100 * float64(rate) / capacity)
		env.FindingMean("stress_percent_of_capacity", pct)
		if pct < stressGoal {
			env.Note("%s: the harness drove %d calls/s, %d%% of the %.0f calls/s the store answered without it: the harness was the bottleneck", env.Tenant, rate, pct, capacity)
		}
	}
	if calls >= stressMaxOps {
		env.Note("%s: stopped sending new orders at %d recorded calls (the cap of one round)", env.Tenant, stressMaxOps)
	}
}

// stressGoal is the share of the store's measured capacity, in percent,
// the stress scenario means to drive.
const stressGoal = 50

// stressOrder is the order index of pair p's j-th order when there are
// pairs pairs: every pair has its own orders, and orders of one round
// stay in one sequence (fresh keys, each in the adversarial key space).
func stressOrder(p, j, pairs int) int { return p + j*pairs }

// measureCapacity calls the store directly from n goroutines for d, each
// claiming a fresh key, asking again while it is in flight (409), saving
// an answer and asking again (a replay): the mix of writes and reads a
// pair of the stress phase makes of an order. It returns the calls per
// second the store answered. Nothing is recorded: the keys
// are in a tenant of their own ("<tenant>-capacity") that no order uses.
func measureCapacity(ctx context.Context, env *Env, n int, d time.Duration) float64 {
	var calls atomic.Int64
	var wg sync.WaitGroup
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t0 := time.Now()
	tenant := env.Tenant + "-capacity"
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; cctx.Err() == nil; i++ {
				k := stores.KeyRef{Tenant: tenant, Key: fmt.Sprintf("g%d-%d", g, i)}
				req := stores.Request{KeyRef: k, Fingerprint: "capacity", Now: env.Clock().Now()}
				dec, err := env.Store.Begin(cctx, req)
				if err != nil || dec.Outcome != stores.Claimed {
					return
				}
				req.Now = env.Clock().Now()
				if _, err := env.Store.Begin(cctx, req); err != nil { // in flight: 409
					return
				}
				if env.Store.Complete(cctx, k, dec.Token, stores.Response{Status: 201, Body: "ok"}) != nil {
					return
				}
				req.Now = env.Clock().Now()
				if _, err := env.Store.Begin(cctx, req); err != nil { // replay
					return
				}
				calls.Add(4)
			}
		}()
	}
	wg.Wait()
	return float64(calls.Load()) / time.Since(t0).Seconds()
}
