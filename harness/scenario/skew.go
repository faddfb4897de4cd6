package scenario

import (
	"context"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// The skew scenario gives one client per key a clock that runs 2×LockTTL
// ahead and sends it the order a healthy owner is working on (the owner's
// work takes LockTTL/8). Whose clock judges staleness decides what happens:
//
//   - caller-clock stores (sqlite, memory: the card's design) see the
//     owner's claim as 2×LockTTL old and let the skewed client take it over.
//     That is the contract followed to the letter with a wrong clock, so it
//     is not a violation: it is counted as the finding skew_takeovers. The
//     owner's save then comes from a superseded token and must be fenced
//     (skew_fenced_writes; the fencing checker must pass), and the
//     downstream key keeps the order charged once.
//   - server-clock stores (postgres, redis) judge by one clock and answer
//     409 until the owner is done: skew_takeovers is 0. A takeover there
//     is the store judging by the request's clock, which it declared it
//     does not: the exclusive-execution checker fails it (the
//     request-clock mutant).
//
// The skewed client holds still after a takeover (LockTTL/2 past the
// owner's work, and then until the owner's work is done), so the two works
// never overlap and the exclusive-execution checker judges the store, not
// the choreography.
// skewAhead is how far the skewed clients' clocks run ahead, in LockTTLs.
const skewAhead = 2

func runSkew(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	work := ttl / 8
	// The skewed clients' first Begins must not wait for sessions a pool
	// is still making (meetingWave warms it): in CI every one of a
	// Postgres store's came after its owner's save (replays), and the
	// skew was tested on no order.
	// A store too slow for every key at once gets them in waves.
	wave := meetingWave(ctx, env, 2, ttl/2)
	first := env.Hist.Now()
	var mu sync.Mutex
	skewedOrder := map[int]string{} // the skewed clients' IDs: their orders
	inWaves(ctx, env.Keys, wave, func(k int) {
		o := env.Order(k, "")
		owner := env.NewClient()
		owner.WorkTime = work
		claimed := newSignal()
		owner.Faults = firstAnswer(claimed, owner.Faults)
		skewed := faults.SkewedClock{Base: env.clock, Skew: skewAhead * ttl}
		ahead := env.NewClient(workload.Rule{Failpoint: faults.RunAfterClaim, Action: workload.PauseFor(work + ttl/2), Times: 1, Key: o.Key})
		ahead.Clock = skewed
		ahead.Store = env.Recorder(ahead.ID, env.Store, skewed)
		mu.Lock()
		skewedOrder[ahead.ID] = o.ID
		mu.Unlock()
		// The owner, its work done, saves only once the skewed client's
		// first Begin has answered (or LockTTL/2 has passed), so on a
		// loaded machine the skewed client still meets a live claim rather
		// than the saved answer. An ordering of events, not a fault: the
		// owner stays well inside its lease.
		met, worked := make(chan struct{}), make(chan struct{})
		var once, workedOnce sync.Once
		meet := func() { once.Do(func() { close(met) }) }
		owner.Yield = faults.HandlerFunc(func(ctx context.Context, name string) error {
			if name == faults.RunAfterWork {
				workedOnce.Do(func() { close(worked) })
				t := time.NewTimer(ttl / 2)
				defer t.Stop()
				select {
				case <-met:
				case <-t.C:
				case <-ctx.Done():
				}
			}
			return nil
		})
		begins := 0
		ahead.Yield = faults.HandlerFunc(func(ctx context.Context, name string) error {
			if name == faults.RunBeforeBegin {
				begins++
			}
			if name == faults.RunAfterClaim {
				// It took the owner's claim over (its clock runs ahead):
				// it starts its work only once the owner's work is done,
				// so the two never overlap however late a loaded machine
				// runs the owner (its pause alone was a guess of time).
				t := time.NewTimer(2 * ttl)
				defer t.Stop()
				select {
				case <-worked:
				case <-t.C:
				case <-ctx.Done():
				}
			}
			if name == faults.RunAfterClaim || begins > 1 { // its first Begin answered
				meet()
			}
			return nil
		})
		parallel(2, func(i int) {
			if i == 0 {
				owner.Submit(ctx, o)
				return
			}
			claimed.wait(ctx, ttl) // the skewed client arrives while the owner works
			ahead.Submit(ctx, o)
			meet()
		})
	})
	ops := env.Hist.Ops()
	takeovers, fenced, late := skewFindings(ops, first, ttl)
	if late > 0 {
		// A slow store (a call of 30 ms, one at a time) or machine took
		// the owners' claims over only once they were stale by every
		// clock: the run found no skew and said nothing of it.
		env.NotTested("skew: %d of %d skewed clients took the owner's claim over only a LockTTL or more after it was made, by the real clock too (a slow store or machine: give it a longer --lock-ttl), so whether the store judged staleness by their clock was not tested there", late, env.Keys)
	}
	env.Count(string(history.CountSkew), env.Keys) // clients with a skewed clock
	env.Finding("skew_takeovers", takeovers)
	env.Finding("skew_fenced_writes", fenced)
	var missed orderList
	for _, id := range skewMissed(ops, first, skewedOrder) {
		missed.add(id)
	}
	missed.say(env, "skew: the skewed client came after the owner had saved its answer (its first answer was a replay; the owner waits for it half a LockTTL at most, and a store slower than that meets it at a longer --lock-ttl), so it met no live claim and its clock was not tested")
}

// skewMissed returns the orders, among the calls since first, whose
// skewed client (skewedOrder: client ID to order) had its first decided
// Begin answered by a replay: it never met the owner's live claim.
func skewMissed(ops []history.Op, first int64, skewedOrder map[int]string) []string {
	seen := map[int]bool{}
	var missed []string
	for _, op := range ops {
		id, ok := skewedOrder[op.Client]
		if !ok || op.Call < first || seen[op.Client] || op.Input.Kind != models.Begin || !op.Output.Decided() {
			continue
		}
		seen[op.Client] = true
		if op.Output.Decision.Outcome == stores.Replay {
			missed = append(missed, id)
		}
	}
	return missed
}

// skewFindings counts, among the calls since first, takeovers of a claim
// that was younger than LockTTL by the history's clock (less 10ms for the
// stores' clock granularity), i.e. of a healthy owner; and the writes of
// those owners that were fenced after it. late counts the takeovers of a
// claim that was no longer young: stale by the real clock too, they say
// nothing of whose clock the store judged by.
func skewFindings(ops []history.Op, first int64, ttl time.Duration) (takeovers, fenced, late int) {
	const margin = 10 * time.Millisecond
	keyed, order := history.ByKey(ops)
	for _, k := range order {
		var prev *history.Op
		var victims []history.Op
		for i, op := range keyed[k] {
			if op.Call < first {
				continue
			}
			if !op.IsClaim() {
				continue
			}
			d := op.Output.Decision
			switch {
			case !d.Takeover || prev == nil || prev.Output.Decision.Token == d.Token:
			case time.Duration(op.Return-prev.Call) < ttl-margin: // a young claim
				takeovers++
				victims = append(victims, *prev)
			default:
				late++
			}
			prev = &keyed[k][i]
		}
		for _, v := range victims {
			for _, op := range keyed[k] {
				if op.Client == v.Client && op.Input.Token == v.Output.Decision.Token && op.Output.Fenced &&
					(op.Input.Kind == models.Complete || op.Input.Kind == models.Release) {
					fenced++
				}
			}
		}
	}
	return takeovers, fenced, late
}
