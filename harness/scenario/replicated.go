package scenario

import (
	"context"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// replicatedRetention is the retention of the failover and partition
// scenarios: longer than a round with its standby rebuilds (tens of
// seconds on a loaded machine), so that a key answered before the
// failover is still kept when the settle phase asks for it again, and a
// fresh claim then is a loss, not an expiry.
const replicatedRetention = 5 * time.Minute

const clusterNeeds = "a replicated store (postgres-replicated, redis-replicated): a primary, a standby and the harness's router"

// clusterRun is the frame of the replicated scenarios: it makes sure the
// topology has a streaming standby, runs paced load while faults runs,
// keeps the load on for 2 LockTTLs on the healed topology, and then
// settles every order (see settle): an answer the failover lost shows as
// a fresh claim of a key that was claimed or answered before.
func clusterRun(ctx context.Context, env *Env, faultsPhase func(cl nemesis.Cluster, l *load) bool) {
	cl := env.Cluster()
	if cl == nil {
		env.Fail("%s", ClusterSkip(env.Caps()))
		return
	}
	t0 := time.Now()
	if err := cl.Ready(ctx); err != nil {
		env.Fail("preparing the %s topology: %v", cl.Kind(), err)
		return
	}
	env.Note("%s: the %s standby streamed from the primary after %v", env.Tenant, cl.Kind(), time.Since(t0).Round(time.Millisecond))
	underLoad(ctx, env, func(l *load) bool { return faultsPhase(cl, l) }, func() {
		// Not past an interrupt: Close removes the topology whatever its state.
		hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := cl.Heal(hctx); err != nil && ctx.Err() == nil {
			env.Fail("healing the %s topology: %v", cl.Kind(), err)
		}
	})
}

// failover ends a faults phase: the failover manager (the harness) fences
// the primary, promotes the standby, routes the clients to it and starts
// a new standby. The window of failover runs from the loss of the primary
// until the clients are routed to the new one; open are the windows that
// end with it.
func failover(ctx context.Context, env *Env, cl nemesis.Cluster, lost *nemesis.Window, open ...*nemesis.Window) bool {
	err := cl.Failover(ctx)
	lost.End()
	for _, w := range open {
		w.End()
	}
	if err != nil {
		env.Fail("failover: %v", err)
		return false
	}
	t0 := time.Now()
	if err := cl.Ready(ctx); err != nil {
		env.Fail("a new standby after the failover: %v", err)
		return false
	}
	env.Note("%s: a new %s standby streamed %v after the failover", env.Tenant, cl.Kind(), time.Since(t0).Round(time.Millisecond))
	return true
}

// runFailover: under paced load, the standby falls behind (its
// replication link is cut) while the primary keeps answering; then the
// primary dies (SIGKILL) or freezes, and the harness fails over to the
// standby. A store that acknowledges before its standby has the write
// (asynchronous replication) loses what it acknowledged during the lag:
// retries claim those keys afresh and run the work again. A synchronous
// store acknowledges nothing during the lag (calls wait, then fail as
// unknown outcomes) and loses nothing.
func runFailover(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	r := env.PlanRand("failover")
	jitter := func(d time.Duration) time.Duration { return time.Duration(r.Int63n(int64(d) + 1)) }
	lagAt := ttl + jitter(ttl)
	lagFor := 2*ttl + jitter(2*ttl)
	pause := r.Intn(2) == 0
	pauseFor := ttl/2 + jitter(ttl)
	env.Note("%s: +%v cut the standby off its replication link (it lags; the primary keeps serving)", env.Tenant, lagAt.Round(time.Millisecond))
	if pause {
		env.Note("%s: +%v freeze the primary for %v, then fence it (SIGKILL) and promote the standby", env.Tenant, (lagAt + lagFor).Round(time.Millisecond), pauseFor.Round(time.Millisecond))
	} else {
		env.Note("%s: +%v kill the primary (SIGKILL) and promote the standby", env.Tenant, (lagAt + lagFor).Round(time.Millisecond))
	}
	clusterRun(ctx, env, func(cl nemesis.Cluster, l *load) bool {
		begun := time.Now()
		if faults.Pause(ctx, time.Until(begun.Add(lagAt))) != nil {
			return false
		}
		lag := nemesis.OpenWindow(env.Hist, history.FaultStandbyLag, "standby")
		if err := cl.LagStandby(ctx); err != nil {
			env.Fail("%v", err)
			return false
		}
		cutAt := time.Now()
		if faults.Pause(ctx, lagFor) != nil { // from the cut: the lag lasts lagFor however long cutting took
			lag.End()
			return false
		}
		holdForAcknowledged(ctx, env, l, cutAt, lagFor, "the standby lagged")
		lost := nemesis.OpenWindow(env.Hist, history.FaultFailover, "primary")
		if pause {
			frozen := nemesis.OpenWindow(env.Hist, history.FaultPrimaryPause, "primary")
			if err := cl.PausePrimary(ctx); err != nil {
				env.Fail("%v", err)
			}
			_ = faults.Pause(ctx, pauseFor)
			return failover(ctx, env, cl, lost, lag, frozen)
		}
		return failover(ctx, env, cl, lost, lag)
	})
}

// runPartition: under paced load, the primary is cut off from the
// clients for a while and healed (calls fail; nothing is lost, nobody
// fails over); later it is cut off from its standby and keeps serving the
// clients, then from the clients too (isolated), and the harness fails
// over to the standby on the other side. An asynchronous store loses
// what the isolated primary acknowledged after the standby was cut off; a
// synchronous one acknowledged nothing then.
func runPartition(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	r := env.PlanRand("partition")
	jitter := func(d time.Duration) time.Duration { return time.Duration(r.Int63n(int64(d) + 1)) }
	clientsAt := ttl/2 + jitter(ttl)
	clientsFor := ttl + jitter(ttl)
	gap := ttl + jitter(ttl)
	standbyFor := 2*ttl + jitter(2*ttl)
	isolatedFor := ttl/2 + jitter(ttl)
	env.Note("%s: +%v cut the primary off the clients for %v, then heal (no failover)", env.Tenant, clientsAt.Round(time.Millisecond), clientsFor.Round(time.Millisecond))
	env.Note("%s: %v after the heal, cut the primary off its standby (it keeps serving the clients) for %v", env.Tenant, gap.Round(time.Millisecond), standbyFor.Round(time.Millisecond))
	env.Note("%s: then cut it off the clients too; %v later fence it (SIGKILL), promote the standby, heal", env.Tenant, isolatedFor.Round(time.Millisecond))
	clusterRun(ctx, env, func(cl nemesis.Cluster, l *load) bool {
		begun := time.Now()
		if faults.Pause(ctx, time.Until(begun.Add(clientsAt))) != nil {
			return false
		}
		w := nemesis.OpenWindow(env.Hist, history.FaultPartitionClients, "network")
		if err := cl.Partition(ctx, nemesis.FromClients); err != nil {
			env.Fail("%v", err)
			w.End()
			return false
		}
		_ = faults.Pause(ctx, clientsFor)
		err := cl.Heal(ctx)
		w.End()
		if err != nil {
			env.Fail("healing the partition: %v", err)
			return false
		}
		if faults.Pause(ctx, gap) != nil {
			return false
		}
		cut := nemesis.OpenWindow(env.Hist, history.FaultPartitionStandby, "network")
		if err := cl.Partition(ctx, nemesis.FromStandby); err != nil {
			env.Fail("%v", err)
			cut.End()
			return false
		}
		cutAt := time.Now()
		if faults.Pause(ctx, standbyFor) != nil {
			cut.End()
			return false
		}
		holdForAcknowledged(ctx, env, l, cutAt, standbyFor, "the primary was cut off its standby")
		iso := nemesis.OpenWindow(env.Hist, history.FaultPartitionBoth, "network")
		lost := nemesis.OpenWindow(env.Hist, history.FaultFailover, "primary")
		if err := cl.Partition(ctx, nemesis.FromBoth); err != nil {
			env.Fail("%v", err)
		}
		_ = faults.Pause(ctx, isolatedFor)
		return failover(ctx, env, cl, lost, cut, iso)
	})
}

// holdForAcknowledged holds a fault that leaves the standby behind the
// primary (begun at cutAt, held for held so far) until the primary has
// acknowledged a claim sent during it (load.waitFresh), for up to held
// again. What the primary acknowledged while its standby was behind is
// what an asynchronous store loses at the failover: a round without one
// cannot show that loss. Beside a busy test suite every call of a
// second's lag can miss its deadline (callTimeout), and such a round
// caught nothing. A synchronous store acknowledges nothing then, so it
// holds the fault the whole extra time, and the note says why.
func holdForAcknowledged(ctx context.Context, env *Env, l *load, cutAt time.Time, held time.Duration, what string) {
	if l.freshSince(cutAt) {
		return
	}
	t0 := time.Now()
	if l.waitFresh(ctx, cutAt, held) {
		env.Note("%s: no claim was acknowledged in the first %v while %s; held %v more until one was",
			env.Tenant, held.Round(time.Millisecond), what, time.Since(t0).Round(time.Millisecond))
		return
	}
	if ctx.Err() != nil {
		return
	}
	// Said beside the verdict (NotTested), not only in the fault
	// schedule: a failover PASS said nothing of it on the console.
	env.NotTested("%s: no claim sent while %s (%v) was acknowledged, so this round judged that nothing acknowledged before the fault was lost, not what a lagging standby forgets: a synchronous store acknowledges nothing then (as it should); an asynchronous one's calls may each have outlasted the %v a call of this round waits",
		env.Tenant, what, time.Since(cutAt).Round(time.Millisecond), callTimeout)
}
