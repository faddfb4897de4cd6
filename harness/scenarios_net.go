package harness

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// The network scenarios put an embedded toxiproxy (faults/netfault) between
// the clients' store and its server. Two of them:
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
// A failed call is recorded as an unknown outcome (harness.Recorder), so
// the checkers allow it to have taken effect or not. The final liveness
// probes go straight to the server. Only server backends have a network to
// fault: on sqlite and memory both scenarios are skipped, saying why.
func init() {
	Scenarios = append(Scenarios,
		Scenario{Name: "network", Doc: "a nemesis switches latency with jitter, connection resets and lost replies on and off between the clients and the server (postgres, redis): unknown outcomes, retried with the same key",
			Needs: netNeeds, Skip: netSkip, run: runNetwork},
		Scenario{Name: "lost-reply", Doc: "a claim, save or release commits on the server and its reply is lost (postgres, redis); the client retries into the unknown state with the same key",
			Needs: netNeeds, Skip: netSkip, run: runLostReply},
	)
}

const netNeeds = "a Postgres or Redis server to put a network proxy in front of"

// netSkip says why a run cannot fault the network between store and data.
func netSkip(o Options) string {
	switch {
	case o.OpenStore != nil:
		return "the store comes from a factory: no server address to put a proxy in front of"
	case o.Backend.Lives != stores.Server:
		return fmt.Sprintf("network faults need a server between the store and its data; %s is embedded (run with --store postgres or redis)", o.Backend.Name)
	case o.Addr == "":
		return "no server address to put a proxy in front of"
	}
	return ""
}

// netProxied starts a proxy in front of the scenario's server and opens
// the scenario's store (same namespace, same variant) through it.
func netProxied(ctx context.Context, env *Env, name string) (*netfault.Proxy, stores.Store, error) {
	p, via, err := netfault.StartFor(name, env.opts.Backend.Name, env.storeAddr)
	if err != nil {
		return nil, nil, err
	}
	st, err := env.opts.Backend.Open(ctx, via, env.Config)
	if err != nil {
		p.Close()
		return nil, nil, fmt.Errorf("open %s store through proxy %s: %w", env.opts.Backend.Name, name, err)
	}
	return p, st, nil
}

// netDone closes the proxied store and the proxy and adds the faults the
// proxy hit to the scenario's counts.
func netDone(env *Env, p *netfault.Proxy, st stores.Store) {
	_ = p.Heal()
	st.Close()
	_ = p.Close()
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.counted == nil {
		env.counted = map[string]int{}
	}
	for k, n := range p.Hits() {
		env.counted[k] += n
	}
}

// netIncomplete notes that the workload could not run as planned: the
// scenario's verdict is then unknown, never pass.
func netIncomplete(env *Env, err error) {
	env.mu.Lock()
	env.incomplete = append(env.incomplete, err.Error())
	env.mu.Unlock()
}

// netVia makes the client reach the store through st (a proxied store).
func netVia(env *Env, c *Client, st stores.Store) {
	c.Store = &Recorder{Store: st, Client: c.ID, Hist: env.Hist, Clock: c.Clock}
}

// netStep is one step of the nemesis: a fault for a while, then a gap.
type netStep struct {
	kind     string
	on, heal time.Duration
}

// netSchedule draws the nemesis's steps from the seed: latency, a reset
// and two lost-reply windows, in a shuffled order. A reset or lost-reply
// window lasts 30-60ms and latency (20±10ms) 150-300ms; after each, the
// network stays healed for LockTTL+50ms plus up to LockTTL/2, so a claim
// orphaned by a lost reply goes stale and is taken over before the next
// fault. (Every call that fails in a window is an unknown outcome the
// linearizability search must place anywhere after its call; the gaps
// keep the number of them on one key small.)
func netSchedule(r *rand.Rand, ttl time.Duration) []netStep {
	kinds := []string{netfault.KindLatency, netfault.KindReset, netfault.KindLostReply, netfault.KindLostReply}
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var steps []netStep
	for _, k := range kinds {
		on := 30*time.Millisecond + time.Duration(r.Int63n(int64(30*time.Millisecond)))
		if k == netfault.KindLatency {
			on = 150*time.Millisecond + time.Duration(r.Int63n(int64(150*time.Millisecond)))
		}
		heal := ttl + 50*time.Millisecond + time.Duration(r.Int63n(int64(ttl/2)+1))
		steps = append(steps, netStep{kind: k, on: on, heal: heal})
	}
	return steps
}

// runNetwork: the clients send orders through one proxy until the nemesis
// has run its schedule. Round after round, each of the round's Keys new
// orders goes to a pair of clients (key k to pair k mod Clients/2), each
// client sending its pair's orders in its own shuffled order with up to
// 10ms between them, so claims, saves and replays all meet faults.
func runNetwork(ctx context.Context, env *Env) {
	env.mu.Lock()
	r := rand.New(rand.NewSource(env.rand.Int63()))
	env.mu.Unlock()
	p, st, err := netProxied(ctx, env, "network")
	if err != nil {
		netIncomplete(env, err)
		return
	}
	defer netDone(env, p, st)
	steps := netSchedule(r, env.Config.LockTTL)
	groups := env.Clients / 2
	if groups < 1 {
		groups = 1
	}
	clients := make([]*Client, env.Clients)
	mine := make([][]int, env.Clients) // the keys of each client's pair, shuffled
	for i := range clients {
		clients[i] = env.NewClient()
		netVia(env, clients[i], st)
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
			var err error
			switch s.kind {
			case netfault.KindLatency:
				err = p.Latency(20*time.Millisecond, 10*time.Millisecond)
			case netfault.KindReset:
				err = p.ResetConnections()
			case netfault.KindLostReply:
				err = p.LoseReplies()
			}
			if err != nil {
				netIncomplete(env, err)
				return
			}
			if faults.Pause(ctx, s.on) != nil {
				return
			}
			if err := p.Heal(); err != nil {
				netIncomplete(env, err)
				return
			}
			if faults.Pause(ctx, s.heal) != nil {
				return
			}
		}
	}()
	parallel(env.Clients, func(i int) {
		c := clients[i]
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

// runLostReply: per key, client A's first claim (keys 0, 3, …), save
// (1, 4, …) or release (2, 5, …: its first work fails) commits and the
// reply is lost; A retries with the same key, and B, a little later,
// sends the same order straight to the server.
func runLostReply(ctx context.Context, env *Env) {
	env.mu.Lock()
	env.mu.Unlock()
	ttl := env.Config.LockTTL
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		target := []models.Kind{models.Begin, models.Complete, models.Release}[k%3]
		p, st, err := netProxied(ctx, env, fmt.Sprintf("lost-reply-%d", k))
		if err != nil {
			netIncomplete(env, err)
			return
		}
		defer netDone(env, p, st)
		if err := netWarm(ctx, st, k); err != nil {
			netIncomplete(env, err)
			return
		}
		a := env.NewClient()
		a.Store = &Recorder{Store: &loseOnce{Store: st, p: p, target: target}, Client: a.ID, Hist: env.Hist, Clock: a.Clock}
		if target == models.Release {
			a.FailWork = func(_ Order, attempt int) bool { return attempt == 1 }
		}
		b := env.NewClient()
		parallel(2, func(i int) {
			if i == 0 {
				a.Submit(ctx, o)
				return
			}
			time.Sleep(ttl/5 + env.jitter(ttl/5))
			b.Submit(ctx, o)
		})
	})
}

// netWarm runs Begin, Complete and Release once on keys outside the
// history, so the proxied connection has its statements prepared (pgx
// prepares on first use, in a round trip of its own) and the call whose
// reply is lost is the one round trip that commits.
func netWarm(ctx context.Context, st stores.Store, k int) error {
	for i, release := range []bool{false, true} {
		key := stores.KeyRef{Tenant: "netwarm", Key: fmt.Sprintf("warm-%d-%d", k, i)}
		d, err := st.Begin(ctx, stores.Request{KeyRef: key, Fingerprint: "warm", Now: time.Now()})
		if err != nil {
			return fmt.Errorf("warm-up through the proxy: %w", err)
		}
		if d.Outcome != stores.Claimed {
			continue
		}
		if release {
			err = st.Release(ctx, key, d.Token)
		} else {
			err = st.Complete(ctx, key, d.Token, stores.Response{Status: 200, Body: "warm"})
		}
		if err != nil {
			return fmt.Errorf("warm-up through the proxy: %w", err)
		}
	}
	return nil
}

// loseOnce loses the reply of the first call of the target kind: it arms
// the proxy (used by this one client alone) to lose the next reply, so
// exactly that call's reply is lost (a driver's reconnect and resend, if
// any, would pass), and disarms it when the call returns.
type loseOnce struct {
	stores.Store
	p      *netfault.Proxy
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
