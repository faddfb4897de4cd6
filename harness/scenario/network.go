package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// The network scenarios put a proxy (nemesis.Network: the embedded
// toxiproxy of faults/netfault, in the CLI) between the clients' store and
// its server. Two of them:
//
//   - network: every client sends orders through one proxy while a nemesis,
//     on a schedule drawn from the seed, switches latency (with jitter),
//     connection resets and lost replies on and off, Jepsen style: a fault,
//     then a healed gap, twice over each kind.
//   - lost-reply: per key, one client's claim, save or release commits on
//     the server and its reply is lost (each such client has a proxy of its
//     own, so exactly that call loses its reply); the client retries into
//     the unknown state with the same key while another client competes.
//
// A failed call is recorded as an unknown outcome (history.Recorder), so
// the checkers allow it to have taken effect or not. The final liveness
// probes go straight to the server. Only server backends have a network to
// fault: on sqlite and memory both scenarios are skipped, saying why.

// runNetwork: the clients send orders through one proxy until the nemesis
// has run its schedule. Round after round, each of the round's Keys new
// orders goes to a pair of clients (key k to pair k mod Clients/2), each
// client sending its pair's orders in its own shuffled order with up to
// 10ms between them, so claims, saves and replays all meet faults.
func runNetwork(ctx context.Context, env *Env) {
	r := rand.New(rand.NewSource(env.Int63()))
	p, st, err := env.Proxied(ctx, "network")
	if err != nil {
		env.Fail("%v", err)
		return
	}
	defer env.Unproxy(p, st)
	steps := nemesis.NetSchedule(r, env.Config.LockTTL)
	groups := env.Clients / 2
	if groups < 1 {
		groups = 1
	}
	clients := make([]*workload.Client, env.Clients)
	mine := make([][]int, env.Clients) // the keys of each client's pair, shuffled
	for i := range clients {
		clients[i] = env.NewClient()
		clients[i].Store = env.Recorder(clients[i].ID, st, clients[i].Clock)
		for _, k := range r.Perm(env.Keys) {
			if k%groups == i%groups {
				mine[i] = append(mine[i], k)
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(stop)
		for _, s := range steps {
			if err := netWindow(ctx, env, "network", p, s.Kind, s.On, 20*time.Millisecond, 10*time.Millisecond); err != nil {
				env.Fail("%v", err)
				return
			}
			if faults.Pause(ctx, s.Heal) != nil {
				return
			}
		}
	}()
	parallel(env.Clients, func(i int) {
		c := clients[i]
		if len(mine[i]) == 0 {
			// More clients than keys (pairs of clients share a key): this
			// one has none. Without this return its loop below spun
			// forever, never reaching the stop or the context's end: a
			// drawn run of 32 clients and 11 keys burned a CPU for 17
			// minutes and ignored Ctrl-C.
			return
		}
		for round := 0; ; round++ {
			for _, k := range mine[i] {
				select {
				case <-stop:
					return
				default:
				}
				if ctx.Err() != nil {
					return
				}
				c.Submit(ctx, env.Order(round*env.Keys+k, ""))
				time.Sleep(time.Duration(c.Rand.Int63n(int64(10 * time.Millisecond))))
			}
		}
	})
	wg.Wait()
}

// netWindow switches a network fault of kind on the proxy on for on
// (latency: lat plus or minus jitter), and keeps it on past that until it
// hits some traffic, for up to netHitPatience more: on a loaded machine
// the clients, backing off after the last fault, waiting on a slow server
// or on the cancels of calls a reset cut, may send nothing for a while. A
// window that still hit nothing is said among the result's notes
// (Env.NotTested), named by scenario. The error is the proxy's.
func netWindow(ctx context.Context, env *Env, scenario string, p nemesis.Proxy, kind string, on, lat, jitter time.Duration) error {
	longest := on + netHitPatience(env.Config.LockTTL)
	hit, err := nemesis.NetWindowHit(ctx, env.Hist, p, kind, on, longest, lat, jitter)
	if err == nil && !hit && ctx.Err() == nil {
		env.NotTested("%s: the %s fault, kept on for %v, hit no traffic: the clients sent nothing through the proxy meanwhile (a loaded machine, a stalled server), and that fault was not tested", scenario, kind, longest)
	}
	return err
}

// netHitPatience is how long past its drawn length a network fault
// window waits for traffic to hit: ten LockTTLs (the clients' backoff is
// at most a third of one), and at least 30 s. In a loaded test suite
// (Postgres taking 14 s to start) a window kept 2.5 s longer still hit
// nothing: 17 calls went through in 35 s.
func netHitPatience(ttl time.Duration) time.Duration {
	return max(10*ttl, 30*time.Second)
}

// runLostReply: per key, client A's first claim (keys 0, 3, …), save
// (1, 4, …) or release (2, 5, …: its first work fails) commits and the
// reply is lost; A retries with the same key, and B, a little later,
// sends the same order straight to the server.
func runLostReply(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	slots := make(chan struct{}, lostReplyAtOnce)
	var unlost orderList
	parallel(env.Keys, func(k int) {
		slots <- struct{}{}
		defer func() { <-slots }()
		o := env.Order(k, "")
		target := []models.Kind{models.Begin, models.Complete, models.Release}[k%3]
		p, st, err := env.Proxied(ctx, fmt.Sprintf("lost-reply-%d", k))
		if err != nil {
			env.Fail("%v", err)
			return
		}
		defer env.Unproxy(p, st)
		if err := netWarm(ctx, st, k); err != nil {
			env.Fail("%v", err)
			return
		}
		a := env.NewClient()
		a.Store = env.Recorder(a.ID, &loseOnce{Store: st, p: p, target: target}, a.Clock)
		if target == models.Release {
			a.FailWork = func(_ workload.Order, attempt int) bool { return attempt == 1 }
		}
		// B comes after A's first Begin was answered (or lost), not at a
		// fixed time after A's start: a store slow to answer A let B
		// claim first, and A's call whose reply is lost was never made.
		answered := newSignal()
		a.Faults = firstAnswer(answered, a.Faults)
		b := env.NewClient()
		parallel(2, func(i int) {
			if i == 0 {
				a.Submit(ctx, o)
				answered.fire()
				return
			}
			answered.wait(ctx, 10*ttl)
			faults.Pause(ctx, ttl/5+env.Jitter(ttl/5)) // an interrupt ends the wait
			b.Submit(ctx, o)
		})
		if p.Hits()[nemesis.NetLostReply] == 0 && ctx.Err() == nil {
			unlost.add(o.ID)
		}
	})
	unlost.say(env, "lost-reply: no reply was lost, as the first client made no call of the kind planned to lose its reply (its order went another way), so its retry into an unknown state was not tested")
}

// lostReplyAtOnce bounds the keys lost-reply works on at once: each has a
// proxy and a store of its own, so its connections to the server, and a
// drawn run of 240 keys (twice, beside other scenarios) met Postgres's
// "too many clients already" and ended undecided.
const lostReplyAtOnce = 8

// netWarm runs Begin, Complete and Release once on keys outside the
// history, so the proxied connection has its statements prepared (pgx
// prepares on first use, in a round trip of its own) and the call whose
// reply is lost is the one round trip that commits.
//
// A claim that came back too late to hand out (stores.ErrLateClaim: a
// loaded machine, a replicated store waiting for its standby), or a call
// whose answer was lost, is tried again on another key, a few times: it
// made its round trips, but left no token to save or release with. A late
// claim used to end the scenario undecided, as an unfinished workload, on
// a correct replicated Postgres store beside other scenarios; a lost
// answer did the same behind scripts/lossy-exec.py. Only netWarmTries
// keys in a row without an answer (a store that answers nothing) stop it.
func netWarm(ctx context.Context, st stores.Store, k int) error {
	for i, release := range []bool{false, true} {
		var err error
		for try := range netWarmTries {
			key := stores.KeyRef{Tenant: "netwarm", Key: fmt.Sprintf("warm-%d-%d-%d", k, i, try)}
			var d stores.Decision
			if d, err = st.Begin(ctx, stores.Request{KeyRef: key, Fingerprint: "warm", Now: faults.RealClock{}.Now()}); err != nil {
				continue // a late claim, or a lost answer: its round trips were made, and another key is claimed
			}
			if d.Outcome != stores.Claimed {
				break
			}
			if release {
				err = st.Release(ctx, key, d.Token)
			} else {
				err = st.Complete(ctx, key, d.Token, stores.Response{Status: 200, Body: "warm"})
			}
			// A save or release refused as fenced is an answer: its lease
			// ran out on the way (a short LockTTL, a loaded machine), which
			// a store may do (lease-bound writes). One whose answer was
			// lost made its round trips too; the next key is warmed whole.
			if err == nil || errors.Is(err, stores.ErrFenced) {
				err = nil
				break
			}
		}
		if err != nil {
			return fmt.Errorf("warm-up through the proxy: %w", err)
		}
	}
	return nil
}

// netWarmTries bounds the keys netWarm claims for one kind of call when
// each claim comes back too late to hand out, or loses an answer.
const netWarmTries = 5

// loseOnce loses the reply of the first call of the target kind: it arms
// the proxy (used by this one client alone) to lose the next reply, so
// exactly that call's reply is lost (a driver's reconnect and resend, if
// any, would pass), and disarms it when the call returns.
type loseOnce struct {
	stores.Store
	p      nemesis.Proxy
	target models.Kind
	mu     sync.Mutex
	done   bool
}

func (l *loseOnce) arm(kind models.Kind) (heal func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || kind != l.target {
		return func() {}
	}
	l.done = true
	if err := l.p.LoseNextReply(); err != nil {
		return func() {}
	}
	return func() { _ = l.p.Heal() }
}

// Begin loses its reply if it is the target.
func (l *loseOnce) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	defer l.arm(models.Begin)()
	return l.Store.Begin(ctx, req)
}

// Complete loses its reply if it is the target.
func (l *loseOnce) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	defer l.arm(models.Complete)()
	return l.Store.Complete(ctx, key, tok, resp)
}

// Release loses its reply if it is the target.
func (l *loseOnce) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	defer l.arm(models.Release)()
	return l.Store.Release(ctx, key, tok)
}
