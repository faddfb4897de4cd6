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

// runHeartbeat, for stores that renew leases (stores.Extender): per key,
// an owner's work takes three LockTTLs and it extends its claim every third
// of one, while two other clients send the same order again and again: the
// owner, healthy and extending, must never be taken over (409 until it
// saves, then its answer). On a second key, an owner stalls after its claim
// for two LockTTLs, before its work and its first heartbeat: it is taken
// over, and its late heartbeats and save must be fenced.
func runHeartbeat(ctx context.Context, env *Env) {
	if !env.Recorder(-1, env.Store, env.clock).CanExtend() {
		env.Skip("the store does not renew leases (a Go store implements stores.Extender; an exec store declares \"extend\": true in its hello)")
		return
	}
	ttl := env.Config.LockTTL
	var untaken orderList
	var mu sync.Mutex
	healthy := map[stores.KeyRef]healthyOwner{}
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		owner := env.NewClient()
		mu.Lock()
		healthy[o.Key] = healthyOwner{client: owner.ID, order: o.ID}
		mu.Unlock()
		owner.WorkTime, owner.Heartbeat = 3*ttl, ttl/3
		// The others come after the owner's claim, not after its start:
		// a store slow to answer the owner would let them claim first.
		claimed := newSignal()
		owner.Faults = firstAnswer(claimed, owner.Faults)
		parallel(3, func(i int) {
			if i == 0 {
				owner.Submit(ctx, o)
				claimed.fire()
				return
			}
			claimed.wait(ctx, 10*ttl)
			c := env.NewClient()
			c.Backoff, c.MaxBackoff, c.MaxAttempts = ttl/4, ttl/4, 40
			if faults.Pause(ctx, ttl/2+env.Jitter(ttl/4)) == nil {
				c.Submit(ctx, o)
			}
		})
		// The stalled owner, on another order of the round.
		s := env.Order(k+env.Keys, "")
		stalled := env.NewClient(workload.Rule{Failpoint: faults.RunAfterClaim, Action: workload.PauseFor(2 * ttl), Times: 1})
		stalled.WorkTime, stalled.Heartbeat, stalled.MaxAttempts = ttl/2, ttl/6, 1
		stalledClaimed, reclaimed := newSignal(), newSignal()
		stalled.Faults = firstAnswer(stalledClaimed, stalled.Faults)
		parallel(2, func(i int) {
			if i == 0 {
				stalled.Submit(ctx, s)
				stalledClaimed.fire()
				return
			}
			stalledClaimed.wait(ctx, 10*ttl)
			if faults.Pause(ctx, ttl+ttl/4) == nil {
				c := env.NewClient()
				c.Faults = onClaim(reclaimed, c.Faults)
				c.Submit(ctx, s)
			}
		})
		if ctx.Err() == nil && !env.Hist.TakenOver(s.Key) && !reclaimed.fired() {
			untaken.add(s.ID)
		}
	})
	untaken.say(env, "heartbeat: no client took the stalled owner's claim over (no Begin was answered as a takeover, or as a claim once the owner's record was pruned), so its late heartbeats and save were not tested against another owner")
	if ctx.Err() != nil {
		return
	}
	var unmet orderList
	for _, id := range heartbeatUnmet(env.Hist.Ops(), healthy, ttl) {
		unmet.add(id)
	}
	unmet.say(env, "heartbeat: no other client's Begin came after the working owner's first LockTTL and before its save, so renewing a working owner's lease was not tested")
}

// healthyOwner is the client that claims an order of the heartbeat
// scenario and works on it, extending its claim.
type healthyOwner struct {
	client int
	order  string
}

// heartbeatUnmet returns the orders whose working owner (healthy, by
// key) no other client met once the owner's first lease had run out: no
// Begin of another client called LockTTL or more after the owner's claim
// returned, and before the owner saved, was answered other than by a
// replay (a 409, or a takeover). Only such a Begin tests the renewal: a
// store that never extends a lease answers it with a takeover. An order
// whose owner has no decided claim is returned too.
func heartbeatUnmet(ops []history.Op, healthy map[stores.KeyRef]healthyOwner, ttl time.Duration) []string {
	claimed := map[stores.KeyRef]int64{}
	saved := map[stores.KeyRef]int64{}
	for _, op := range ops {
		h, ok := healthy[op.Input.Key]
		if !ok || op.Client != h.client {
			continue
		}
		if at, seen := claimed[op.Input.Key]; op.IsClaim() && (!seen || op.Return < at) {
			claimed[op.Input.Key] = op.Return
		}
		if at, seen := saved[op.Input.Key]; op.Input.Kind == models.Complete && (!seen || op.Call < at) {
			saved[op.Input.Key] = op.Call
		}
	}
	met := map[stores.KeyRef]bool{}
	for _, op := range ops {
		h, ok := healthy[op.Input.Key]
		at, claim := claimed[op.Input.Key]
		if !ok || !claim || op.Client == h.client || op.Input.Kind != models.Begin || !op.Output.Decided() ||
			op.Output.Decision.Outcome == stores.Replay || op.Call < at+int64(ttl) {
			continue
		}
		if save, ok := saved[op.Input.Key]; !ok || op.Call < save {
			met[op.Input.Key] = true
		}
	}
	var unmet []string
	for k, h := range healthy {
		if !met[k] {
			unmet = append(unmet, h.order)
		}
	}
	return unmet
}
