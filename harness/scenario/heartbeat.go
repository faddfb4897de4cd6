package scenario

import (
	"context"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/workload"
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
		env.Skip("the store does not renew leases (it does not implement stores.Extender)")
		return
	}
	ttl := env.Config.LockTTL
	var untaken orderList
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		owner := env.NewClient()
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
		stalledClaimed := newSignal()
		stalled.Faults = firstAnswer(stalledClaimed, stalled.Faults)
		parallel(2, func(i int) {
			if i == 0 {
				stalled.Submit(ctx, s)
				stalledClaimed.fire()
				return
			}
			stalledClaimed.wait(ctx, 10*ttl)
			if faults.Pause(ctx, ttl+ttl/4) == nil {
				env.NewClient().Submit(ctx, s)
			}
		})
		if ctx.Err() == nil && !env.Hist.TakenOver(s.Key) {
			untaken.add(s.ID)
		}
	})
	untaken.say(env, "heartbeat: no client took the stalled owner's claim over (no Begin was answered as a takeover), so its late heartbeats and save were not tested against a takeover")
}
