package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemcheck/idemcheck/stores"
)

// AsyncReplication is the configuration mutant "redis-async-replication"
// of the redis-replicated backend: the correct scripts, answered as soon
// as the primary has run them, as Redis replicates by default
// (asynchronously). A failover to the replica then forgets what the
// replica had not received yet: acknowledged claims and answers vanish,
// and retries run the work again.
const AsyncReplication = "redis-async-replication"

// waitTimeout bounds WAIT: a reply the replica has not confirmed by then
// is an error (an unknown outcome), not an answer.
const waitTimeout = 500 * time.Millisecond

// ErrNotReplicated is wrapped by the errors of the synchronous replicated
// store when the replica did not confirm a reply in time: the script ran
// on the primary, and its outcome is unknown.
var ErrNotReplicated = errors.New("redis: not confirmed by the replica")

// NewReplicated opens the store of the redis-replicated backend at addr
// (the harness's router to the current primary). Its variants are correct
// (synchronous: every reply waits for one replica) and AsyncReplication.
//
// Redis has no synchronous replication of its own: WAIT only blocks the
// caller until the replicas have received the writes this connection made,
// and the primary shows those writes to everyone meanwhile. So the correct
// store sends each script with a barrier (waitBarrier) that also covers
// what the script read: no reply leaves the store before the replica has
// every write the reply could depend on. What stays (the risk, see
// docs/DESIGN.md "Replicated stores"): a write whose WAIT timed out stays
// on the primary; its caller holds an unknown outcome, and a failover may
// keep or lose it.
//
// Both variants refuse a claim that took three quarters of its LockTTL
// or more (stores.ErrLateClaim): the script took the lease when it ran, before
// WAIT, and the lease may be gone by the time the owner hears of it.
func NewReplicated(ctx context.Context, addr string, cfg stores.Config) (*Store, error) {
	replicas := 1
	switch cfg.Variant {
	case "", stores.Correct:
	case AsyncReplication:
		replicas = 0
	default:
		return nil, errors.New("redis-replicated: unknown variant " + cfg.Variant + " (known: correct, " + AsyncReplication + ")")
	}
	st, err := newStore(ctx, addr, cfg, replicas)
	if err != nil {
		return nil, err
	}
	st.lateAfter = cfg.LockTTL * 3 / 4 // as postgres.LateAfter
	return st, nil
}

// waitBarrier queues, after a script, INCR of the namespace's barrier key
// and WAIT replicas: the INCR is a write after everything the script saw
// (Redis runs one command at a time), so WAIT, which waits for this
// connection's last write, returns only once the replicas have all of it,
// the writes of other clients that the script read included. WAIT alone
// would not wait for those: a reply read from another client's claim that
// the replica never got would be lost by a failover after it was given.
func waitBarrier(ctx context.Context, pipe goredis.Pipeliner, prefix string, replicas int) *goredis.Cmd {
	pipe.Incr(ctx, prefix+"__replication_barrier")
	return pipe.Do(ctx, "WAIT", replicas, waitTimeout.Milliseconds())
}
