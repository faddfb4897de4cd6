package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// runKeySpace: every member of at least one family of the adversarial key
// space (workload.KeyFor: keys that differ only in case, whitespace,
// tenant, Unicode normalisation, a byte after a long prefix) is sent by one
// client, one after another, then each is sent again with the same
// parameters (it must replay its own answer) and with other parameters (it
// must be refused with 422), among them its own followed by a wildcard.
// Then new orders whose key or tenant is a pattern of an order's
// (patternOrders), and a key each order's key extends, claimed and
// released, after which each order must still replay. A store that merges
// two of the keys answers one of them with the other's record: a 422 to
// its own parameters, or another order's answer.
func runKeySpace(ctx context.Context, env *Env) {
	n := max(env.Keys, workload.KeyVariants)
	orders := make([]workload.Order, n)
	for i := range orders {
		orders[i] = env.Order(i, "")
	}
	first, again, other := keySpaceClient(env), keySpaceClient(env), keySpaceClient(env)
	for _, o := range orders {
		first.Submit(ctx, o)
	}
	for i, o := range orders {
		again.Submit(ctx, o)
		other.Submit(ctx, env.Order(i, "&currency=eur"))
		other.Submit(ctx, env.OtherAmount(i))
		// Its own parameters followed by a LIKE wildcard: other
		// parameters, which a store that compares fingerprints as a
		// pattern replays.
		other.Submit(ctx, env.Order(i, "%"))
	}
	// New operations whose key or tenant is a pattern matching an order's
	// (patternOrders): a store that matches keys by pattern finds the old
	// record and replays its answer, or refuses them.
	probe := keySpaceClient(env)
	taken := map[stores.KeyRef]bool{}
	for i, o := range orders {
		taken[o.Key] = true
		for _, p := range patternOrders(o, i) {
			probe.Submit(ctx, p)
			taken[p.Key] = true
		}
	}
	// Prefix neighbours: for each order, a new key that its key extends
	// is claimed and released by its owner (a release after failed
	// work); then each order is asked again and must replay. A store that
	// releases "the key and its side keys" (every key it extends) deletes
	// the order's record, and the retry runs the work again.
	rec := env.Recorder(env.NewClientID(), env.Store, env.clock)
	for _, o := range orders {
		n, ok := strictPrefix(o.Key, taken)
		if !ok {
			continue
		}
		d, err := rec.Begin(ctx, stores.Request{KeyRef: n, Fingerprint: o.Fingerprint, Now: env.clock.Now()})
		if err == nil && d.Outcome == stores.Claimed {
			_ = rec.Release(ctx, n, d.Token)
		}
	}
	retry := keySpaceClient(env)
	for _, o := range orders {
		retry.Submit(ctx, o)
	}
}

// keySpaceClient is a client of the key-space scenario: it tries an
// order keySpaceAttempts times. Nothing is injected there and one client
// calls at a time, so a store's error is its answer to the key (a key it
// cannot hold), not a passing fault: the default 25 tries with backoff
// cost about 2 s per refused key, and a store that refuses a few dozen
// of the keys (the joined-key mutant on SQLite and Postgres: a tenant and
// key joined outgrow the column) took 29 s to judge instead of 1.
func keySpaceClient(env *Env) *workload.Client {
	c := env.NewClient()
	c.MaxAttempts = keySpaceAttempts
	env.ApplyWorkload(c) // a client-side mutant's own retry policy stays
	return c
}

// keySpaceAttempts bounds a key-space client's tries per order: a retry
// still follows an error once.
const keySpaceAttempts = 2

// strictPrefix is the longest key in k's tenant that k's key extends and
// that no order of the run has (taken), if there is one.
func strictPrefix(k stores.KeyRef, taken map[stores.KeyRef]bool) (stores.KeyRef, bool) {
	for cut := len(k.Key) - 1; cut > 0; cut-- {
		n := stores.KeyRef{Tenant: k.Tenant, Key: k.Key[:cut]}
		if !taken[n] {
			return n, true
		}
	}
	return stores.KeyRef{}, false
}

// wildcards are the pattern characters of the usual matchers: SQL LIKE's
// one character and any run, glob's (Redis KEYS and SCAN MATCH, SQLite
// GLOB), and a regular expression's or Lua pattern's any character.
var wildcards = []string{"_", "%", "?", "*", "."}

// patternOrders are two new orders made from o, the i-th order of
// key-space, with o's parameters: one whose key is o's with its first
// byte replaced by a wildcard (wildcards, taken in rotation, so that each
// appears on every run), one whose tenant is o's followed by a wildcard of
// any run (% or *). Each matches o's key or tenant as a pattern and equals
// no key or tenant of the run: a correct store runs each once, a store
// that matches by pattern answers it with o's record. The first byte is
// the one replaced because the grammar's keys differ after it
// (workload.KeyFor), so no two orders' probes share a key.
func patternOrders(o workload.Order, i int) []workload.Order {
	key := o
	key.ID = o.ID + "-pattern-key"
	key.Key.Key = wildcards[i%len(wildcards)] + o.Key.Key[1:]
	tenant := o
	tenant.ID = o.ID + "-pattern-tenant"
	tenant.Key.Tenant = o.Key.Tenant + []string{"%", "*"}[i%2]
	return []workload.Order{key, tenant}
}

// FamilyKeys is how many keys a round needs to hold every member of one
// family of the adversarial key space (workload.KeyVariants): with fewer,
// a round's keys may all fall in different tenants, and a statement that
// loses its key condition meets no neighbour.
const FamilyKeys = workload.KeyVariants

// foreignTokens is how many other keys' tokens abuse sends each key at
// most: more than the adversarial key families have members
// (workload.KeyVariants), so every key meets each of its neighbours'.
const foreignTokens = 2 * workload.KeyVariants

// foreignKeys lists the keys whose tokens abuse sends key k of n: every
// other key, or with more than foreignTokens others the foreignTokens
// nearest on either side (a family's members are neighbours), so the
// calls grow linearly with the keys (every other key's token made 10,000
// keys send 400 million calls).
func foreignKeys(k, n int) []int {
	var out []int
	if n-1 <= foreignTokens {
		for j := 0; j < n; j++ {
			if j != k {
				out = append(out, j)
			}
		}
		return out
	}
	for d := 1; d <= foreignTokens/2; d++ {
		out = append(out, (k+d)%n, (k-d+n)%n)
	}
	return out
}

// runAbuse: clients that break the contract's etiquette, as real apps do.
// Per key (every member of a family of the adversarial key space, so that
// a key's neighbours, the same name in another tenant or another case, are
// among the others), an owner claims, charges and saves, and then, with its
// own token: releases the key (a release in a defer that runs after the
// save) and saves again with another answer (a retried save). Other calls
// come with the token of another key, an empty token, a made-up one and
// hostile ones (workload.HostileTokens: patterns, the token's prefix, its case):
// while every key is in flight (a foreign token that is live on its own
// key, which a store that does not match the whole key would accept there)
// and once the keys are done. The store must fence every one of them; a
// client retrying the order must still be replayed the first answer, and
// the work must not run again.
func runAbuse(ctx context.Context, env *Env) {
	type claim struct {
		key stores.KeyRef
		tok stores.Token
		rec *history.Recorder
		id  int
		o   workload.Order
		at  time.Time // the claim's call, by the store's clock source
	}
	n := max(env.Keys, workload.KeyVariants)
	claims := make([]claim, n)
	var unfenced unfencedCalls
	// Every owner claims its key.
	parallel(n, func(k int) {
		o := env.Order(k, "")
		id := env.NewClientID()
		rec := env.Recorder(id, env.Store, env.clock)
		at := env.clock.Now()
		d, err := ownerClaim(ctx, env, rec, o)
		if err != nil {
			env.Fail("abuse: the owner of %s could not claim it: %v", o.Key, err)
			return
		}
		claims[k] = claim{o.Key, d.Token, rec, id, o, at}
		// While in flight: calls that are not the owner's must be fenced.
		for _, t := range workload.HostileTokens(d.Token) {
			unfenced.add(rec.Complete(ctx, o.Key, t, stores.Response{Status: 201, Body: "forged"}))
			unfenced.add(rec.Release(ctx, o.Key, t))
		}
	})
	// foreign sends each key the tokens of the next foreignTokens keys
	// (all the others, with fewer keys): enough to meet every family
	// neighbour, linear in the keys (every other key's token made 10,000
	// keys send 400 million calls).
	foreign := func(body string) {
		parallel(n, func(k int) {
			rec := env.Recorder(env.NewClientID(), env.Store, env.clock)
			for _, j := range foreignKeys(k, n) {
				// A token equal to the key's own is no other key's: a
				// store may number its tokens per key (v1, v2, …), and
				// its contract asks a token to be unique only within
				// its key (stores.Store).
				c := claims[j]
				if c.tok == "" || claims[k].tok == "" || c.tok == claims[k].tok {
					continue
				}
				unfenced.add(rec.Complete(ctx, claims[k].key, c.tok, stores.Response{Status: 201, Body: body}))
				unfenced.add(rec.Release(ctx, claims[k].key, c.tok))
			}
		})
	}
	foreign("foreign live token") // every key in flight: each token is live on its own key
	// Each owner charges and saves, then abuses its own token.
	var pastLease, pastRetention atomic.Int64 // saves rightly fenced: nothing saved to abuse
	parallel(n, func(k int) {
		c := claims[k]
		if c.tok == "" {
			return
		}
		o, id, rec := c.o, c.id, c.rec
		w := env.Hist.AddWork(historyWork(id, o, c.tok, env.Hist.Now()))
		charge := env.Ledger.Charge(o.ID, "charge:"+o.ID, id, env.Hist.Now())
		env.Hist.EndWork(w, false, charge)
		resp := stores.Response{Status: 201, Body: fmt.Sprintf("charged %s %d cents (owner %s)", charge, o.Amount, id2s(id))}
		sent := env.clock.Now()
		switch saved, err := ownerSave(ctx, env, rec, o, c.tok, resp); {
		case errors.Is(err, stores.ErrFenced) && env.setup.Semantics.LeaseBoundWrites && sent.Sub(c.at) >= env.Config.LockTTL:
			// A store whose ownership ends with the lease may fence a
			// save sent a LockTTL or more after the claim was asked
			// for (the foreign calls of many keys took that long on a
			// loaded machine): its right, and the checkers judge the
			// fence. The key's owner has nothing saved to abuse.
			env.Count("abuse_saves_past_lease", 1)
			pastLease.Add(1)
			return
		case errors.Is(err, stores.ErrFenced) && sent.Sub(c.at) >= env.Config.Retention:
			// The same for any store once the retention has passed since
			// the claim: the record may be gone (Redis expires it), and
			// the save rightly fenced (100 keys of abuse on Redis at load
			// 40 sent their saves 30 s after their claims, past the 10 s
			// retention). The checkers judge the fence.
			env.Count("abuse_saves_past_retention", 1)
			pastRetention.Add(1)
			return
		case err != nil:
			env.Fail("abuse: the owner of %s could not save: %v", o.Key, err)
			return
		case saved:
			env.Hist.AddAnswer(historyAnswer(id, o, resp, env.Hist.Now()))
		}
		// Else a save whose answer was lost was fenced when sent again:
		// it may have been saved, and the retried order says so.
		// Done: the owner's own token must be fenced now too.
		unfenced.add(rec.Release(ctx, o.Key, c.tok))                                                      // a deferred release
		unfenced.add(rec.Complete(ctx, o.Key, c.tok, stores.Response{Status: 500, Body: "retried save"})) // a save sent twice
		// No token, a made-up one, patterns, the token's prefix and case.
		for _, t := range workload.HostileTokens(c.tok) {
			unfenced.add(rec.Complete(ctx, o.Key, t, stores.Response{Status: 201, Body: "forged"}))
			unfenced.add(rec.Release(ctx, o.Key, t))
		}
	})
	// What a fenced save left out is said: the run passed saying nothing
	// of it (a slow store with a 1 s retention fenced every save, and
	// none of the abuse after a save was sent).
	if l, r := pastLease.Load(), pastRetention.Load(); l+r > 0 {
		env.NotTested("abuse: the calls after a save (a release after it, the save sent twice, hostile tokens on a done key) were not sent on %d of %d keys: "+
			"their owners' saves came %d past the lease and %d past the retention since the claim, and were rightly fenced (a slow store: give it a LockTTL or a retention longer than its calls)",
			l+r, n, l, r)
	}
	// Each key with every other key's token once done, then the orders retried.
	foreign("foreign token")
	parallel(n, func(k int) { env.NewClient().Submit(ctx, env.Order(k, "")) })
	unfenced.say(env)
}

// unfencedCalls tallies the abuse calls that must be fenced and were
// answered with an error instead: neither fenced nor a definite no-op,
// their outcome is unknown, and whether the store fenced them was not
// judged. A store that choked on an empty token (a missing field in its
// language) answered every such call with an error, and abuse passed
// without a word of it.
type unfencedCalls struct {
	all, failed atomic.Int64
	first       atomic.Pointer[string]
}

// add counts one call that must be fenced, by its answer.
func (u *unfencedCalls) add(err error) {
	u.all.Add(1)
	if err == nil || errors.Is(err, stores.ErrFenced) || errors.Is(err, stores.ErrNotApplied) {
		return // judged: a save or release that took effect fails the checkers
	}
	u.failed.Add(1)
	msg := err.Error()
	u.first.CompareAndSwap(nil, &msg)
}

// say notes the calls whose fencing was not judged, if any.
func (u *unfencedCalls) say(env *Env) {
	if n := u.failed.Load(); n > 0 {
		env.NotTested("abuse: %d of %d saves and releases that must be fenced (a token not the owner's, or the owner's after its save) ended in an error, not fenced: "+
			"their outcome is unknown, so whether the store fenced them was not judged (the first: %s)", n, u.all.Load(), *u.first.Load())
	}
}

// ownerTries bounds the calls in a row without an answer an abuse owner
// makes for one claim or one save: a store that answers nothing.
const ownerTries = 8

// ownerRefusals bounds the calls an abuse owner makes for one claim or
// one save that the store declares not applied: a store that refuses
// every call. A refusal changes nothing, so it is asked again, as the
// final probes ask again (probeRefusedTries).
const ownerRefusals = 64

// ownerCalls bounds all the calls an abuse owner makes for one claim:
// behind a link that loses answers, a claim whose answer was lost answers
// 409 until it is stale, and the takeover that follows may lose its
// answer too, so the calls come in rounds of a LockTTL (about five), each
// ending in a takeover answered with the link's odds; this many rounds
// all lost is a store that does not let the key be claimed.
const ownerCalls = 40 * 5

// ownerClaim claims o's key for an owner that calls the store itself, as a
// client would: a call that ends in an error may or may not have claimed
// (a store may lose an answer now and then and still be correct), so it
// asks again with the same key, and a claim whose answer was lost answers
// 409 until it is stale and then is taken over. It waits for that from
// the last lost answer, whose claim may have been made as late as the
// error came back: a deadline from the first call gave up on a correct
// store whose call erred after holding a write lock for longer than the
// wait (TestOwnerClaimWaitsFromTheLastLostAnswer). Its errors in a row
// are bounded by ownerTries, all its calls by ownerCalls: an error between
// answers is a lost answer, not a store that stopped answering (a bound
// on all the errors gave up on a correct store behind a link that lost
// a share of the answers, whose owner's takeovers lost theirs round after
// round; TestOwnerClaimThroughALossyLink).
//
// A call the store declared not applied (stores.ErrNotApplied: a
// definite no-op, a transaction its database rolled back) is asked again
// as a 409 would be, up to ownerRefusals times: it lost nothing. An owner
// gave up on it as on a lost answer, and abuse ended undecided on a
// correct SQLite store whose busy database refused three calls in four.
func ownerClaim(ctx context.Context, env *Env, rec *history.Recorder, o workload.Order) (stores.Decision, error) {
	errs, lost, refused := 0, 0, 0 // errors in a row, and in all; refusals
	var lostAt time.Time           // the last lost answer (zero: none yet)
	for calls := 1; ; calls++ {
		d, err := rec.Begin(ctx, stores.Request{KeyRef: o.Key, Fingerprint: o.Fingerprint, Now: env.clock.Now()})
		switch {
		case err == nil && d.Outcome == stores.Claimed:
			return d, nil
		case err == nil && (d.Outcome != stores.InFlight || lostAt.IsZero()):
			return d, fmt.Errorf("answered %v", d.Outcome)
		case err == nil:
			errs = 0 // the store answers: a claim whose answer was lost holds the key
		case errors.Is(err, stores.ErrNotApplied):
			errs = 0 // an answer: nothing happened
			if refused++; refused == ownerRefusals {
				return d, err
			}
			calls-- // not a call towards ownerCalls: it changed nothing
		default:
			if errs++; errs == ownerTries {
				return d, err
			}
			lost++
			lostAt = time.Now()
		}
		if calls == ownerCalls {
			return d, fmt.Errorf("no claim after %d calls, %d of them without an answer", calls, lost)
		}
		if since := time.Since(lostAt); !lostAt.IsZero() && since > 4*env.Config.LockTTL+time.Second {
			return d, fmt.Errorf("still in flight %v after the last lost answer (LockTTL %v)", since.Round(time.Millisecond), env.Config.LockTTL)
		}
		if err := faults.Pause(ctx, env.Config.LockTTL/4); err != nil {
			return d, err
		}
	}
}

// ownerSave saves resp under the owner's token, sending it again while the
// store does not answer. saved is false when a save whose answer was lost
// is fenced when sent again: the first may have been saved (a correct
// store fences a second save on a done key), so the owner cannot tell.
// A save declared not applied is sent again, up to ownerRefusals times,
// as ownerClaim asks again.
func ownerSave(ctx context.Context, env *Env, rec *history.Recorder, o workload.Order, tok stores.Token, resp stores.Response) (saved bool, err error) {
	for errs, refused := 0, 0; ; {
		err := rec.Complete(ctx, o.Key, tok, resp)
		switch {
		case err == nil:
			return true, nil
		case errs > 0 && errors.Is(err, stores.ErrFenced):
			return false, nil
		case errors.Is(err, stores.ErrFenced):
			return false, err
		case errors.Is(err, stores.ErrNotApplied):
			if refused++; refused == ownerRefusals {
				return false, err
			}
		default:
			if errs++; errs == ownerTries {
				return false, err
			}
		}
		if err := faults.Pause(ctx, env.Config.LockTTL/10); err != nil {
			return false, err
		}
	}
}

// historyWork is the work run of an order by a client that called the
// store itself (not through a workload.Client).
func historyWork(client int, o workload.Order, tok stores.Token, at int64) history.WorkRun {
	return history.WorkRun{Client: client, Key: o.Key, Order: o.ID, Token: tok, Start: at, End: history.Never}
}

// historyAnswer is the final answer such a client gave its caller.
func historyAnswer(client int, o workload.Order, r stores.Response, at int64) history.Answer {
	return history.Answer{Client: client, Key: o.Key, Order: o.ID, Fingerprint: o.Fingerprint, Response: r, Status: r.Status, Attempts: 1, At: at}
}

func id2s(id int) string { return fmt.Sprintf("client-%d", id) }
