package scenario

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// widen pauses every client briefly between a read and the write that
// depends on it: a no-op for a store that decides in one atomic step.
func widen() workload.Rule {
	return workload.Rule{Failpoint: faults.BeginAfterSelect, Action: workload.PauseFor(3 * time.Millisecond)}
}

// widened makes n clients for one key's race, each with the read-to-write
// window widened (widen) and, where a split Begin announces its read
// (faults.BeginAfterSelect), held there until all n have read or
// rendezvousWait has passed since the first did (newReadRendezvous). The
// fixed pause alone leaves the race to the goroutines' timing: on a store
// that makes no round trip (memory), under make test's load, one run of
// race did not catch select-then-insert on any of its 8 keys.
func widened(env *Env, n int) []*workload.Client {
	read := newReadRendezvous(n)
	clients := make([]*workload.Client, n)
	for i := range clients {
		clients[i] = env.NewClient(widen())
		clients[i].Faults = read.first(faults.BeginAfterSelect, clients[i].Faults)
	}
	return clients
}

// runRace: per key, every client sends the key's order at once, with the
// read-to-write window widened and the clients held together at their
// first round trip (see rendezvous). Up to raceKeysAtOnce keys race at the same
// time, each with its own Clients clients, so a large --keys drives the
// store near its capacity instead of waiting out one key's backoffs after
// another. Keys are handed out, and their clients drawn from the seed, in
// key order.
func runRace(ctx context.Context, env *Env) {
	if env.Clients < 2 {
		// Each key's order is sent, and still checked, but by one client:
		// a PASS here judged no concurrent claim.
		env.NotTested("race: one client a key (--clients %d), so no key was raced: concurrent claims were not tested", env.Clients)
	}
	warmConnections(ctx, env, min(env.Keys, raceKeysAtOnce)*env.Clients)
	var apart, blind orderList
	unmet := map[stores.KeyRef]string{} // keys whose store passed no failpoint: judged by their Begins' times
	var mu sync.Mutex
	next := 0
	parallel(min(env.Keys, raceKeysAtOnce), func(int) {
		for {
			mu.Lock()
			k := next
			next++
			if k >= env.Keys || ctx.Err() != nil {
				mu.Unlock()
				return
			}
			o := env.Order(k, "")
			clients := widened(env, env.Clients)
			// The clients meet before their first Begin, and again
			// inside the store before its first round trip: a store
			// that passes no failpoint (one in memory) is raced by the
			// first meeting alone.
			meet, send := newRendezvous(env.Clients), newRendezvous(env.Clients)
			for _, c := range clients {
				c.Faults = send.first(faults.RunBeforeBegin, meet.first(faults.BeforeRoundTrip, c.Faults))
			}
			mu.Unlock()
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Add(1)
				go func(c *workload.Client) {
					defer wg.Done()
					<-start
					c.Submit(ctx, o)
				}(c)
			}
			close(start)
			wg.Wait()
			switch {
			case len(clients) < 2 || ctx.Err() != nil:
			case meet.apart():
				apart.add(o.ID)
			case !meet.reached():
				mu.Lock()
				unmet[o.Key] = o.ID
				mu.Unlock()
			}
		}
	})
	apart.say(env, fmt.Sprintf("race: no two of the key's clients were in the store at once (each came after the one before had waited %v for the others and gone on), so the key was not raced", rendezvousWait))
	for _, id := range unraced(env, unmet) {
		blind.add(id)
	}
	blind.say(env, "race: the store passed no failpoint in its calls (faults.Hit before each round trip), so the key's clients met only before they called it, and no two of its Begins were in the store at the same time: the key was not raced")
	sayRaceTakeovers(env)
}

// sayRaceTakeovers says when race's owners lost their claims: race sends
// no pause past LockTTL, so a takeover there is an owner the store (or
// the machine) kept past its lease, and the race's premise, one owner
// and the rest 409 or a replay, broke. SQLite under 64 clients and a
// loaded machine had each order claimed 49 times and 3,280 saves fenced,
// and its undecided run said only that porcupine timed out. It says too
// when no Begin met a live claim at all: a store of one process per call
// (an exec store) served each key's clients one after the other, and a
// store that takes live claims over passed race.
func sayRaceTakeovers(env *Env) {
	takeovers, fenced, left, early, met, begins := 0, 0, 0, 0, 0, 0
	_ = env.Hist.EachPart(func(p *history.History) error {
		ops := p.Ops()
		byKey := map[stores.KeyRef][]history.Op{} // a takeover looks at its key's calls alone
		for _, op := range ops {
			byKey[op.Input.Key] = append(byKey[op.Input.Key], op)
		}
		for _, op := range ops {
			if op.Input.Kind == models.Begin {
				begins++
				if op.Output.Decided() && op.Output.Decision.Outcome == stores.InFlight {
					met++
				}
			}
			switch {
			case op.IsClaim() && op.Output.Decision.Takeover:
				takeovers++
				if leftBehind(byKey[op.Input.Key], op) {
					left++
				} else if takenEarly(byKey[op.Input.Key], op, env.Config.LockTTL) {
					early++
				}
			case op.Output.Fenced && op.Input.Kind == models.Complete:
				fenced++
			}
		}
		return nil
	})
	switch {
	case met > 0 || begins <= env.Keys:
	case waitedOnAClaim(env.Hist):
		// The losers came while the claim was live (a store whose
		// Begin waits for it was said to have had them come after).
		env.NotTested("race: no Begin of %d was answered in-flight: those that came while their key's claim was live were answered only once it was saved (the store waits for a live claim, or was slow to answer them), so none was decided on a live claim, and a store that takes live claims over would pass race (sched-race interleaves it on purpose)", begins)
	default:
		// Every loser came once the winner had saved: a store that
		// takes live claims over passed race so, saying nothing.
		env.NotTested("race: no Begin of %d met a live claim (none answered in-flight): each key's other clients came once its first had saved, so the race for a live claim was not tested (sched-race interleaves it on purpose)", begins)
	}
	if left > 0 {
		// The card's client goes back to Begin when its save fails,
		// and meets its own claim: a store that refused a save (not
		// applied) was said to answer its owners slower than their
		// lease, calls of 0.7 s under a 30 s one.
		env.NotTested("race: %d claims of %d keys took over a claim whose owner's save or release had failed (an error, or refused as not applied): the card's client then goes back to Begin, meets its own claim (409) and waits until LockTTL (%v) has passed, when another client takes the key over; those keys were not a race for the claim alone",
			left, env.Keys, env.Config.LockTTL)
	}
	if takeovers -= left; takeovers == 0 {
		return
	}
	why := ""
	if early > 0 {
		// A store whose whole-second clock took claims over 15 to 38 ms
		// into a 250 ms lease was said to be slow.
		why = fmt.Sprintf("; %d of them came sooner than half a LockTTL after the claim they took over was asked for: a store that takes a claim over inside its lease (a clock that rounds the claim's age up, a lease in the wrong unit) does so whatever the load", early)
	}
	env.NotTested("race: %d claims of %d keys took over a claim gone stale (%d saves of stale owners fenced): race pauses no owner past LockTTL (%v), so the store answered its owners slower than their lease (a loaded machine, a store queueing writes), and those keys were not a race for the claim alone; a longer LockTTL (--lock-ttl; in idemtest, Factory.LockTTL), or fewer clients or keys (--clients, --keys, flags of idemcheck check), keeps owners live%s",
		takeovers, env.Keys, fenced, env.Config.LockTTL, why)
}

// leftBehind reports whether the takeover t (of ops, its key's calls)
// took over a claim whose owner's Complete or Release, before t, ended
// without the store's decision (an error of unknown outcome, or one
// declared not applied): the owner left its claim to run out, not the
// store its owner.
func leftBehind(ops []history.Op, t history.Op) bool {
	owner, found := ownerOf(ops, t)
	if !found {
		return false
	}
	for _, o := range ops {
		if (o.Input.Kind == models.Complete || o.Input.Kind == models.Release) && o.Input.Token == owner.Output.Decision.Token && !o.Output.Decided() && o.Call < t.Call {
			return true
		}
	}
	return false
}

// warmConnections makes n calls at once on env's store (capped at
// warmAtOnce) on keys of a tenant of their own, outside the history, and
// releases what they claim, so that a store with a pool of connections has opened them
// before the race: a race on a fresh Postgres store waited for its
// sessions instead. Each session is a forked backend, about 33 ms of CPU
// on the project's machine, and the postmaster starts them one after
// another: a round of 2 keys and 12 clients sent its Begins within 5 ms,
// the claim came back at 135 ms and the others from 386 to 457 ms, past
// the rendezvous's wait, after the claim was saved, so no Begin met a
// live claim. Its errors are ignored: the race itself meets them.
func warmConnections(ctx context.Context, env *Env, n int) {
	warmPool(ctx, env, env.Store, n)
}

// warmPool is warmConnections on st, one of env's stores (a store
// through a proxy has a pool of its own).
func warmPool(ctx context.Context, env *Env, st stores.Store, n int) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range min(n, warmAtOnce) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			key := stores.KeyRef{Tenant: "racewarm", Key: fmt.Sprintf("warm-%d", i)}
			d, err := st.Begin(ctx, stores.Request{KeyRef: key, Fingerprint: "warm", Now: env.Clock().Now()})
			if err == nil && d.Outcome == stores.Claimed {
				_ = st.Release(ctx, key, d.Token)
			}
		}()
	}
	close(start)
	wg.Wait()
}

// warmAtOnce caps warmConnections' calls: more than any store's pool.
const warmAtOnce = 64

// rendezvous holds each of a key's racing clients at its first pass of a
// failpoint (its first round trip into the store; a split Begin's read,
// for newReadRendezvous) until all of them are there, or rendezvousWait
// has passed, then lets them go together. Their goroutines start at once, but on a loaded
// machine they may still reach the store one after another, each Begin
// answered before the next is sent, and the race would not be one (the
// CLI's test saw 1 Begin at a time on SQLite under make test's load).
// Held inside Begin, they are all in it at once. A store that makes no
// round trip (memory) never reaches the failpoint and is not held. It is
// not a fault: nothing is recorded.
type rendezvous struct {
	n    int
	mu   sync.Mutex
	came int
	all  chan struct{}
	// waiting counts the clients held now; together is set once a client
	// came while another was held: two of them were in the store at once.
	waiting  int
	together bool
	// deadline, when once is set, is wait after the first arrival: no
	// client is held past it (newReadRendezvous).
	once     bool
	deadline time.Time
	// wait bounds a client's wait (rendezvousWait where zero).
	wait time.Duration
}

// reached reports whether any client reached the failpoint.
func (r *rendezvous) reached() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.came > 0
}

// apart reports whether clients reached the store (the failpoint) but
// never two of them at once: each came after the last had given up
// waiting, and the key was not raced.
func (r *rendezvous) apart() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.came > 0 && !r.together
}

// rendezvousWait bounds how long a client waits for the others.
const rendezvousWait = 50 * time.Millisecond

func newRendezvous(n int) *rendezvous { return &rendezvous{n: n, all: make(chan struct{})} }

// newReadRendezvous is a rendezvous whose wait is one for all: it ends
// rendezvousWait after the first client came, however many came. It holds
// clients after a read, where a store may hold a lock (a correct store
// announcing its read inside a transaction): each client waiting
// rendezvousWait in turn for others the lock keeps out would cost the
// key that many waits; one deadline costs it one.
func newReadRendezvous(n int) *rendezvous {
	return &rendezvous{n: n, all: make(chan struct{}), once: true}
}

// first returns next with the rendezvous at the client's first pass of
// failpoint; the handler belongs to one client.
func (r *rendezvous) first(failpoint string, next faults.Handler) faults.Handler {
	met := false
	return faults.HandlerFunc(func(ctx context.Context, name string) error {
		if name == failpoint && !met {
			met = true
			r.arrive(ctx)
		}
		if next == nil {
			return nil
		}
		return next.Hit(ctx, name)
	})
}

func (r *rendezvous) arrive(ctx context.Context) {
	r.mu.Lock()
	r.came++
	if r.waiting > 0 {
		r.together = true
	}
	r.waiting++
	if r.came == r.n {
		close(r.all)
	}
	wait := cmp.Or(r.wait, rendezvousWait)
	if r.once {
		if r.came == 1 {
			r.deadline = time.Now().Add(wait)
		}
		wait = time.Until(r.deadline)
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-r.all:
	case <-t.C:
	case <-ctx.Done():
	}
}

// raceKeysAtOnce bounds the keys the race scenario runs at once: enough
// to keep a fast store busy through the clients' backoffs (a key's round
// is a few milliseconds of work and retries), few enough that its
// goroutines (Clients per key) stay cheap. On the memory store with
// --keys 10000 (2 cores): 64 at once 50k calls/s, CPU half idle; 256 at
// once 87k calls/s; 512 at once 65k calls/s (the harness's own goroutines
// contend).
const raceKeysAtOnce = 256

// runTakeover: per key, owner A pauses past LockTTL (after its claim or
// after its work; on some keys its work then fails, so it releases), while
// B and C retry and take over at the same moment.
func runTakeover(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	defer env.RunPruner(ctx, ttl/2)() // maintenance runs while owners pause and others take over
	var untaken orderList
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		at := faults.RunAfterWork
		if k%2 == 1 {
			at = faults.RunAfterClaim
		}
		// A sleeps past LockTTL, and on until another client has taken
		// its claim over (at most 10 LockTTLs: a store that never takes
		// over), so that its stale save or release always comes after a
		// takeover: on a loaded machine the takers' retries could miss a
		// fixed window, and an unfenced save then went unseen.
		reclaimed := newSignal() // B or C claimed the key (see onClaim)
		a := env.NewClient(workload.Rule{Failpoint: at, Times: 1, Key: o.Key,
			Action: workload.PauseUntil(2*ttl+env.Jitter(ttl/2), 10*ttl, func() bool { return env.Hist.TakenOver(o.Key) || reclaimed.fired() })})
		if k%4 == 3 {
			a.FailWork = func(workload.Order, int) bool { return true } // paused, then fails: a stale release
			a.MaxAttempts = 1
		}
		// B and C come LockTTL/5 after A's claim, not after A's start: a
		// store slow to answer A (a connection still being made) let them
		// claim first, and A, never an owner, had nothing to fence.
		claimed := newSignal()
		a.Faults = firstAnswer(claimed, a.Faults)
		bc := widened(env, 2)
		b, c := bc[0], bc[1]
		b.Faults, c.Faults = onClaim(reclaimed, b.Faults), onClaim(reclaimed, c.Faults)
		parallel(3, func(i int) {
			if i == 0 {
				a.Submit(ctx, o)
				claimed.fire()
				return
			}
			claimed.wait(ctx, 10*ttl)
			faults.Pause(ctx, ttl/5) // an interrupt ends the wait
			[]*workload.Client{b, c}[i-1].Submit(ctx, o)
		})
		if ctx.Err() == nil && !env.Hist.TakenOver(o.Key) && !reclaimed.fired() {
			untaken.add(o.ID)
		}
	})
	untaken.say(env, "takeover: no client took the paused owner's claim over (no Begin was answered as a takeover, or as a claim once the owner's record was pruned, within 10 LockTTLs of its pause or at all), so its late save or release was not tested against another owner")
}

// orderList collects, from the goroutines of a scenario's keys, the
// orders for which something the workload meant to test did not happen.
type orderList struct {
	mu  sync.Mutex
	ids []string
}

func (l *orderList) add(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
}

// say records one note for every order collected (Env.NotTested): what,
// how many of the scenario's orders, and which (the first few).
func (l *orderList) say(env *Env, what string) {
	if len(l.ids) == 0 {
		return
	}
	slices.Sort(l.ids)
	ids := strings.Join(l.ids[:min(len(l.ids), 5)], ", ")
	if len(l.ids) > 5 {
		ids += ", …"
	}
	env.NotTested("%s: %d of %d orders (%s)", what, len(l.ids), env.Keys, ids)
}

// runCrash: per key, owner A crashes after its claim or after its work and
// never cleans up; B retries until it can take over.
func runCrash(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	defer env.RunPruner(ctx, ttl/2)() // maintenance runs while crashed claims wait to go stale
	var untaken orderList
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		at := []string{faults.RunAfterClaim, faults.RunAfterWork}[k%2]
		a := env.NewClient(workload.Rule{Failpoint: at, Action: workload.Crash(), Times: 1, Key: o.Key})
		b := env.NewClient()
		reclaimed := newSignal() // B claimed the key (see onClaim)
		b.Faults = onClaim(reclaimed, b.Faults)
		a.Submit(ctx, o)
		faults.Pause(ctx, ttl/10+env.Jitter(ttl/10)) // an interrupt ends the wait (a LockTTL of minutes waits as long)
		b.Submit(ctx, o)
		if ctx.Err() == nil && !env.Hist.TakenOver(o.Key) && !reclaimed.fired() {
			untaken.add(o.ID)
		}
	})
	untaken.say(env, "crash: no client took the crashed owner's claim over (no Begin was answered as a takeover, or as a claim once the owner's record was pruned), so recovery from a crash was not tested")
}

// runError: the work fails after charging (the provider's reply is lost)
// on the first attempts; even keys release the claim on error, odd keys
// save the error and replay it.
func runError(ctx context.Context, env *Env) {
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		policy := stores.ReleaseOnError
		if k%2 == 1 {
			policy = stores.SaveError
		}
		n := 3
		if env.Clients < n {
			n = env.Clients
		}
		parallel(n, func(i int) {
			c := env.NewClient()
			c.Policy = policy
			c.FailWork = func(_ workload.Order, attempt int) bool { return attempt <= 2 }
			time.Sleep(env.Jitter(5 * time.Millisecond))
			c.Submit(ctx, o)
		})
	})
}

// runMismatch: per key, the first request runs while others reuse the key
// with other parameters, during and after it. The others come after the
// first request's claim, and its owner, its work done, saves only once
// both have been answered (or LockTTL/2, at most 5 s, has passed, well
// inside its lease): fixed sleeps from the start let a loaded machine
// answer them after the save, and a store that mishandles other
// parameters only while a claim is live went untested. Orders whose
// others were not both answered before the save are said in a note
// (Env.NotTested).
func runMismatch(ctx context.Context, env *Env) {
	const mismatchMeetWait = 5 * time.Second
	ttl := env.Config.LockTTL
	// The others' first Begins must not wait for sessions a pool is still
	// making (meetingWave warms it): beside a loaded suite, on a fresh
	// Postgres store, none was answered before its owner's save. A store
	// too slow for every key at once gets them in waves.
	wave := meetingWave(ctx, env, 3, min(ttl/2, mismatchMeetWait))
	var unmet orderList
	inWaves(ctx, env.Keys, wave, func(k int) {
		o := env.Order(k, "")
		// One other request adds a parameter, the other changes the
		// amount's value (Env.OtherAmount).
		others := []workload.Order{env.Order(k, "&currency=eur"), env.OtherAmount(k)}
		owner := env.NewClient()
		owner.WorkTime = 20 * time.Millisecond
		claimed := newSignal()
		owner.Faults = firstAnswer(claimed, owner.Faults)
		answered := []*signal{newSignal(), newSignal()}
		met := false // the owner worked, and both others were answered before its save
		owner.Yield = faults.HandlerFunc(func(ctx context.Context, name string) error {
			if name == faults.RunAfterWork {
				// A store that makes the others wait for the owner (a lock
				// held through its work) answers them only after the save:
				// with a production LockTTL that would be minutes.
				end := time.Now().Add(min(ttl/2, mismatchMeetWait))
				met = true
				for _, a := range answered {
					met = a.wait(ctx, time.Until(end)) && met
				}
			}
			return nil
		})
		parallel(3, func(i int) {
			if i == 0 {
				owner.Submit(ctx, o)
				claimed.fire()
				return
			}
			claimed.wait(ctx, 10*ttl)
			c := env.NewClient()
			c.Faults = firstAnswer(answered[i-1], c.Faults)
			c.Submit(ctx, others[i-1])
			answered[i-1].fire()
		})
		if ctx.Err() == nil && !met {
			unmet.add(o.ID)
		}
		for _, other := range others {
			env.NewClient().Submit(ctx, other)
		}
		env.NewClient().Submit(ctx, o)
	})
	unmet.say(env, "mismatch: the requests with other parameters were not both answered while the first request's claim was live (its owner saved first, having waited for them half a LockTTL and 5 s at most; a store slower than that meets them at a longer --lock-ttl), so reuse during a request was not tested")
}

// runRetention: orders complete; a pruner runs throughout; clients retry
// each order inside the retry window (well inside the retention) and must
// get the replay. Then keys of two ages under the same names: once the
// pruner stops, each key's name is claimed again in a tenant of its own
// (youngOrder), and when the old keys are past their retention a prune
// runs with both in the store: the young keys, three quarters of a
// retention old, must stay (their retries replay) and the old ones must
// be gone (the leak probes).
func runRetention(ctx context.Context, env *Env) {
	ret := env.Config.Retention
	stop := env.RunPruner(ctx, ret/8)
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		env.NewClient().Submit(ctx, o)
		retry := env.NewClient()
		for i := 0; i < 2; i++ { // at 0.3 and 0.6 of the retention
			faults.Pause(ctx, ret*3/10) // an interrupt ends the wait
			retry.Submit(ctx, o)
		}
	})
	stop()
	if faults.Pause(ctx, ret/2) != nil {
		return
	}
	old, young := make([]stores.KeyRef, env.Keys), make([]workload.Order, env.Keys)
	for k := range young {
		o := env.Order(k, "")
		old[k], young[k] = o.Key, youngOrder(o)
	}
	parallel(env.Keys, func(k int) { env.NewClient().Submit(ctx, young[k]) })
	// Past the old keys' retention, the store must have let them go, and
	// kept the young ones.
	if faults.Pause(ctx, ret*3/4) != nil {
		return
	}
	_, _ = env.Recorder(env.NewClientID(), env.Store, env.clock).Prune(ctx, env.clock.Now())
	parallel(env.Keys, func(k int) { env.NewClient().Submit(ctx, young[k]) })
	env.ProbeLeaks(ctx, old)
}

// youngOrder is o under the same key name in a tenant of its own: a key of
// another age, which a store that prunes by name alone deletes with o's.
func youngOrder(o workload.Order) workload.Order {
	o.ID += "-young"
	o.Key.Tenant += "-young"
	return o
}
