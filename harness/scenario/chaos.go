package scenario

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/worker"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// chaosCan says which fault kinds the run allows, and why not the others.
type chaosCan struct {
	workers, server, net string // "" if possible, else why not
}

func chaosAllowed(c Caps) chaosCan {
	return chaosCan{workers: WorkersSkip(c), server: ServerSkip(c), net: NetSkip(c)}
}

// why says whether the event is possible in this run ("") or why not.
func (c chaosCan) why(ev nemesis.ChaosEvent) string {
	switch {
	case ev.Kind == nemesis.ChaosWorkerKill || ev.Kind == nemesis.ChaosWorkerKillAt:
		return c.workers
	case ev.Kind == nemesis.ChaosServerPause || ev.Kind == nemesis.ChaosServerRestart:
		return c.server
	case strings.HasPrefix(ev.Kind, nemesis.ChaosNet):
		return c.net
	}
	return ""
}

// chaosBacklog is the most orders the chaos scenario leaves unanswered
// with one worker process: a few LockTTLs of its feed.
const chaosBacklog = 8

// runChaos: the Jepsen pattern with every fault the store allows. Phase 1,
// faults on: in-process clients (in pairs sending the same orders) and
// worker processes run orders while a nemesis follows the seed's schedule:
// clients pause or crash at failpoints, workers are killed at failpoints
// and at random moments, the server is paused and restarted, and the
// network between half the clients and the server adds latency, resets
// connections and loses replies. Phase 2, healed: every fault is undone
// and the server answers again. Phase 3, quiet: every order is sent again
// by a patient client until it has an answer.
func runChaos(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	defer env.RunPruner(ctx, ttl)() // maintenance runs through every phase
	plan := nemesis.ChaosPlan(env.PlanRand("chaos"), ttl, env.Clients)
	can := chaosAllowed(env.Caps())
	var live []nemesis.ChaosEvent
	skipped := map[string][]string{} // the kinds of events not injected, by why
	var whys []string
	for _, ev := range plan {
		if why := can.why(ev); why != "" {
			env.Note("%s: %s (skipped: %s)", env.Tenant, ev, why)
			if _, ok := skipped[why]; !ok {
				whys = append(whys, why)
			}
			if !slices.Contains(skipped[why], ev.Kind) {
				skipped[why] = append(skipped[why], ev.Kind)
			}
			continue
		}
		env.Note("%s: %s", env.Tenant, ev)
		live = append(live, ev)
	}
	// What the plan meant and this store could not take is said beside
	// the verdict, not only in the schedule: a chaos that passed without
	// its server faults judged less than its name says.
	for _, why := range whys {
		env.NotTested("chaos injected no %s: %s", strings.Join(skipped[why], ", "), why)
	}

	// The network: a proxy in front of the server, and a store through it
	// for half the client slots.
	var proxy nemesis.Proxy
	var proxied stores.Store
	if can.net == "" {
		var err error
		if proxy, proxied, err = env.Proxied(ctx, "chaos"); err != nil {
			env.Fail("network proxy: %v", err)
			return
		}
		defer env.Unproxy(proxy, proxied)
	}
	sf := env.Server()

	// Client faults fire at their failpoint on their order, in whichever
	// client of the pair owns the key: one plan shared by every client.
	var rules []workload.Rule
	for _, ev := range live {
		r := workload.Rule{Failpoint: ev.Failpoint, Key: env.Order(ev.Order, "").Key, Times: 1}
		switch ev.Kind {
		case nemesis.ChaosClientPause:
			r.Action = workload.PauseFor(ev.For)
		case nemesis.ChaosClientCrash:
			r.Action = workload.Crash()
		default:
			continue
		}
		rules = append(rules, r)
	}
	shared := workload.NewPlan(env.Hist, rules...)
	mk := func(slot int) *workload.Client {
		c := env.timedClient()
		c.Faults = shared.For(c.ID)
		// Odd slots go through the proxy; a single client does, or no
		// call would meet a network fault (each window waited its 30 s
		// for traffic, and chaos at --clients 1 took 101 s).
		if proxied != nil && (slot%2 == 1 || env.Clients == 1) {
			c.Store = env.Recorder(c.ID, workload.WithDeadline(proxied, callTimeout), env.clock)
		}
		return c
	}

	// Workers, killed at failpoints by the plan.
	var p *worker.Pool
	if can.workers == "" {
		kills := nemesis.NewKillList()
		for _, ev := range live {
			if ev.Kind == nemesis.ChaosWorkerKillAt {
				kills.Arm(ev.Failpoint, env.Order(ev.Order, "").Key)
			}
		}
		p = env.WorkerPool(ctx, worker.Options{
			Announce:    []string{faults.RunAfterClaim, faults.RunAfterWork},
			CallTimeout: callTimeout,
			MaxUnknown:  maxUnknown,
			Decide:      kills.Decide,
			// The server may be paused or restarting at any time in
			// the faults phase; once healed, it opens within the
			// start's own bound.
			StartPatience: max(worker.DefaultStartPatience, nemesis.ChaosWindow*ttl+worker.StartTimeout),
		})
		var startErr error
		var smu sync.Mutex
		parallel(2, func(int) {
			if _, err := p.Start(); err != nil {
				smu.Lock()
				startErr = err
				smu.Unlock()
			}
		})
		if startErr != nil {
			env.Fail("starting worker processes: %v", startErr)
			p.CloseAll()
			return
		}
	}

	// The clients' first orders carry the client faults: their Begins
	// must not wait for sessions a pool is still making (on Postgres the
	// first order's fault at run.after-work went unreached in three
	// default runs of three).
	warmConnections(ctx, env, env.Clients)
	if proxied != nil {
		warmPool(ctx, env, proxied, env.Clients)
	}

	// Phase 1: faults on.
	l := &load{env: env}
	stopLoad := l.start(ctx, mk, 2*ttl/5)
	stop := make(chan struct{}) // the worker processes' feed
	var loaded sync.WaitGroup
	var fed []workload.Order
	if p != nil {
		loaded.Add(1)
		go func() {
			defer loaded.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				o := env.Order(nemesis.ChaosWorkerOrders+j, "")
				given := false
				for i := 0; i < 2; i++ { // on two workers at once: they race
					// Not to a worker the faults hold up: its orders
					// would pile up for as long as they last (a slow
					// heal under load piled up thousands, run long
					// after the faults, or never).
					if w := p.Victim(j + i); w != nil && w.Backlog() < chaosBacklog {
						w.Submit(o)
						given = true
					}
				}
				if given {
					fed = append(fed, o)
				}
				if faults.Pause(ctx, 2*ttl/5) != nil {
					return
				}
			}
		}()
	}
	begun := time.Now()
	var injecting sync.WaitGroup
	var net []nemesis.ChaosEvent
	for _, ev := range live {
		if ev.Kind == nemesis.ChaosClientPause || ev.Kind == nemesis.ChaosClientCrash || ev.Kind == nemesis.ChaosWorkerKillAt {
			continue // armed at their failpoints
		}
		if strings.HasPrefix(ev.Kind, nemesis.ChaosNet) {
			net = append(net, ev)
			continue
		}
		injecting.Add(1)
		go func(ev nemesis.ChaosEvent) {
			defer injecting.Done()
			if faults.Pause(ctx, time.Until(begun.Add(ev.At))) != nil {
				return
			}
			chaosInject(ctx, env, ev, p, sf)
		}(ev)
	}
	if len(net) > 0 {
		injecting.Add(1)
		go func() {
			defer injecting.Done()
			chaosNet(ctx, env, begun, net, proxy)
		}()
	}
	injecting.Wait()
	_ = faults.Pause(ctx, time.Until(begun.Add(nemesis.ChaosWindow*ttl)))

	// Phase 2: heal everything, then let the load run on a healthy system.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	if proxy != nil {
		if err := proxy.Heal(); err != nil {
			env.Fail("healing the network: %v", err)
		}
	}
	if sf != nil {
		if err := sf.Heal(hctx); err != nil {
			env.Fail("healing the server: %v", err)
		}
	}
	cancel()
	_ = faults.Pause(ctx, 2*ttl)
	close(stop)
	stopLoad()
	loaded.Wait()
	sayUnmetServerFaults(env, "chaos")
	for _, r := range shared.Unfired() {
		env.NotTested("%s: the client fault at %s on %s was not injected: no client of the load reached it while the faults were on (its order's work ran in another way, or only once the faults were healed)",
			env.Tenant, r.Failpoint, r.Key)
	}
	if p != nil {
		p.CloseAll()
	}

	// Phase 3: quiet retries, straight to the server, until every order
	// has an answer.
	orders := l.orders()
	seen := map[string]bool{}
	for _, o := range orders {
		seen[o.ID] = true
	}
	for _, o := range fed {
		if !seen[o.ID] {
			seen[o.ID] = true
			orders = append(orders, o)
		}
	}
	if left := settle(ctx, env, orders); len(left) > 0 {
		env.Fail("%d orders without an answer after the faults were healed (first %s)", len(left), left[0].ID)
	}
}

// chaosInject injects one timed fault of the workers or the server and,
// for those with a duration, undoes it when its time is up.
func chaosInject(ctx context.Context, env *Env, ev nemesis.ChaosEvent, p *worker.Pool, sf nemesis.Server) {
	var err error
	switch {
	case ev.Kind == nemesis.ChaosWorkerKill:
		if killed, _, why := killVictim(ctx, p, ev.Slot); !killed && ctx.Err() == nil {
			env.NotTested("chaos: %s did not happen: %s", ev, why)
		}
	case ev.Kind == nemesis.ChaosServerPause:
		err = nemesis.PauseServer(ctx, env.Hist, sf, ev.For)
	case ev.Kind == nemesis.ChaosServerRestart:
		err = nemesis.RestartServer(context.WithoutCancel(ctx), env.Hist, sf)
	}
	if err != nil {
		env.Fail("%v", err)
	}
}

// chaosNet runs the network faults (in the order of the plan, which
// keeps them apart: healing one heals all) one after another, each from
// its planned time or once the one before has healed. Latency stays well
// below LockTTL, so latency alone never makes a claim stale. Each window
// is kept on past its planned length until it hits some traffic, as in
// the network scenario (netWindow): on Postgres, a latency window planned
// just after a reset hit nothing in every default run, while the proxied
// clients waited on the cancels of their reset calls (cancelGrace), and
// chaos passed without testing latency.
func chaosNet(ctx context.Context, env *Env, begun time.Time, net []nemesis.ChaosEvent, proxy nemesis.Proxy) {
	ttl := env.Config.LockTTL
	for _, ev := range net {
		if faults.Pause(ctx, time.Until(begun.Add(ev.At))) != nil {
			return
		}
		if err := netWindow(ctx, env, "chaos", proxy, strings.TrimPrefix(ev.Kind, nemesis.ChaosNet), ev.For, ttl/8, ttl/16); err != nil {
			env.Fail("%v", err)
			return
		}
	}
}
