package harness

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/stores"
)

// Chaos fault kinds, as the schedule and ScenarioResult.Faults name them
// (client pauses and crashes count as "pause" and "crash", worker kills as
// FaultWorkerKill, server faults as FaultServerPause and FaultServerRestart).
const (
	chaosClientPause   = "client-pause"
	chaosClientCrash   = "client-crash"
	chaosWorkerKill    = "worker-kill"
	chaosWorkerKillAt  = "worker-kill-at"
	chaosServerPause   = "server-pause"
	chaosServerRestart = "server-restart"
	chaosNet           = "net-" // + a netfault kind
)

// chaosEvent is one planned fault.
type chaosEvent struct {
	Kind string
	// At is when a timed fault starts, from the start of the faults phase.
	At time.Duration
	// For is how long a pause, hold or network fault lasts.
	For time.Duration
	// Slot is the index (among the live workers, by id) of the worker a
	// timed kill hits.
	Slot int
	// Order is the order a fault at a failpoint waits for (its index).
	Order     int
	Failpoint string
}

func (ev chaosEvent) String() string {
	switch ev.Kind {
	case chaosClientPause:
		return fmt.Sprintf("the client owning order %d pauses %v at %s", ev.Order, ev.For.Round(time.Millisecond), ev.Failpoint)
	case chaosClientCrash:
		return fmt.Sprintf("the client owning order %d crashes at %s", ev.Order, ev.Failpoint)
	case chaosWorkerKillAt:
		return fmt.Sprintf("kill the worker owning order %d at %s", ev.Order, ev.Failpoint)
	case chaosWorkerKill:
		return fmt.Sprintf("+%v kill live worker #%d", ev.At.Round(time.Millisecond), ev.Slot)
	case chaosServerPause:
		return fmt.Sprintf("+%v pause the server for %v", ev.At.Round(time.Millisecond), ev.For.Round(time.Millisecond))
	case chaosServerRestart:
		return fmt.Sprintf("+%v kill the server (SIGKILL) and start it again", ev.At.Round(time.Millisecond))
	}
	return fmt.Sprintf("+%v %s for %v", ev.At.Round(time.Millisecond), ev.Kind, ev.For.Round(time.Millisecond))
}

// chaosWindow is how long the faults phase lasts, in LockTTLs.
const chaosWindow = 12

// chaosWorkerOrders is the index of the first order the worker processes
// run: theirs alone (each on two workers at once), so that a worker owns
// each of them and a kill planned at a failpoint finds its owner.
const chaosWorkerOrders = 1000

// chaosPlan draws the round's fault schedule from r (planRand: the seed
// and the round). It is a pure function of them and of the run's shape
// (LockTTL, client slots), so a failing run is replayed by running it again
// with the same flags: it does not depend on which faults the store allows
// (those not possible are listed as skipped) nor on which other scenarios
// ran.
func chaosPlan(r *rand.Rand, ttl time.Duration, slots int) []chaosEvent {
	w := chaosWindow * ttl
	streams := (slots + 1) / 2
	fps := []string{faults.RunAfterClaim, faults.RunAfterWork}
	dur := func(lo, spread time.Duration) time.Duration { return lo + time.Duration(r.Int63n(int64(spread)+1)) }
	var plan []chaosEvent
	// Client faults and kills at failpoints each on a distinct order
	// among the first ones the clients (or the workers) send.
	clientOrders := r.Perm(6 * streams)
	for i := 0; i < 2; i++ {
		plan = append(plan, chaosEvent{Kind: chaosClientPause, Order: clientOrders[i], Failpoint: fps[r.Intn(2)], For: dur(2*ttl, ttl)})
	}
	for i := 2; i < 4; i++ {
		plan = append(plan, chaosEvent{Kind: chaosClientCrash, Order: clientOrders[i], Failpoint: fps[r.Intn(2)]})
	}
	workerOrders := r.Perm(6)
	for i := 0; i < 2; i++ {
		plan = append(plan, chaosEvent{Kind: chaosWorkerKillAt, Order: chaosWorkerOrders + workerOrders[i], Failpoint: fps[r.Intn(2)]})
	}
	for i := 0; i < 2; i++ {
		plan = append(plan, chaosEvent{Kind: chaosWorkerKill, At: dur(0, w), Slot: r.Intn(8)})
	}
	pauseAt := dur(w/10, w/4)
	pauseFor := dur(ttl, ttl)
	plan = append(plan, chaosEvent{Kind: chaosServerPause, At: pauseAt, For: pauseFor})
	plan = append(plan, chaosEvent{Kind: chaosServerRestart, At: pauseAt + pauseFor + dur(w/8, w/4)})
	// Network faults one after another (healing one heals all), with gaps.
	at := dur(0, w/4)
	for i, n := 0, 2+r.Intn(2); i < n; i++ {
		kind := netfault.Kinds[r.Intn(len(netfault.Kinds))]
		ev := chaosEvent{Kind: chaosNet + kind, At: at, For: dur(ttl/2, ttl)}
		plan = append(plan, ev)
		at += ev.For + dur(ttl/2, ttl)
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
	return plan
}

// chaosCan says which fault kinds the run allows, and why not the others.
type chaosCan struct {
	workers, server, net string // "" if possible, else why not
}

func chaosAllowed(o Options) chaosCan {
	c := chaosCan{workers: WorkersSkip(o), server: ServerFaultsSkip(o), net: ""}
	switch {
	case o.OpenStore != nil:
		c.net = "the store comes from a factory: no server address to put a proxy in front of"
	case o.Backend.Lives != stores.Server:
		c.net = fmt.Sprintf("the %s store is embedded: there is no network between it and its data", o.Backend.Name)
	}
	return c
}

// why says whether the event is possible in this run ("") or why not.
func (c chaosCan) why(ev chaosEvent) string {
	switch {
	case ev.Kind == chaosWorkerKill || ev.Kind == chaosWorkerKillAt:
		return c.workers
	case ev.Kind == chaosServerPause || ev.Kind == chaosServerRestart:
		return c.server
	case len(ev.Kind) > len(chaosNet) && ev.Kind[:len(chaosNet)] == chaosNet:
		return c.net
	}
	return ""
}

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
	plan := chaosPlan(planRand(env, "chaos"), ttl, env.Clients)
	can := chaosAllowed(env.opts)
	var live []chaosEvent
	for _, ev := range plan {
		if why := can.why(ev); why != "" {
			env.note("%s: %s (skipped: %s)", env.Tenant, ev, why)
			continue
		}
		env.note("%s: %s", env.Tenant, ev)
		live = append(live, ev)
	}

	// The network: a proxy in front of the server, and a store through it
	// for half the client slots.
	var proxy *netfault.Proxy
	var proxied stores.Store
	if can.net == "" {
		p, via, err := netfault.StartFor("chaos", env.opts.Backend.Name, env.storeAddr)
		if err == nil {
			proxy = p
			proxied, err = env.opts.Backend.Open(ctx, via, env.Config)
		}
		if err != nil {
			env.fail("network proxy: %v", err)
			if proxy != nil {
				proxy.Close()
			}
			return
		}
		defer proxy.Close()
		defer proxied.Close()
	}
	var sf *ServerFaults
	if can.server == "" {
		var err error
		if sf, err = NewServerFaults(env.opts.Server); err != nil {
			env.fail("%v", err)
			return
		}
		defer sf.Close()
	}

	// Client faults fire at their failpoint on their order, in whichever
	// client of the pair owns the key.
	cf := &chaosClientFaults{env: env, armed: map[string]chaosEvent{}}
	for _, ev := range live {
		if ev.Kind == chaosClientPause || ev.Kind == chaosClientCrash {
			cf.armed[ev.Failpoint+"\x00"+env.Order(ev.Order, "").Key.String()] = ev
		}
	}
	mk := func(slot int) *Client {
		c := env.timedClient()
		c.Handler = cf.handler(c.ID)
		if proxied != nil && slot%2 == 1 {
			c.Store = &Recorder{Store: withDeadline(proxied, callTimeout), Client: c.ID, Hist: env.Hist, Clock: env.clock}
		}
		return c
	}

	// Workers, killed at failpoints by the plan.
	var p *pool
	if can.workers == "" {
		kills := newKillList()
		for _, ev := range live {
			if ev.Kind == chaosWorkerKillAt {
				kills.arm(ev.Failpoint, env.Order(ev.Order, "").Key)
			}
		}
		p = newPool(ctx, env, WorkerOptions{
			Announce:    []string{faults.RunAfterClaim, faults.RunAfterWork},
			CallTimeout: callTimeout,
			MaxUnknown:  maxUnknown,
			Decide:      kills.decide,
		})
		var startErr error
		var smu sync.Mutex
		parallel(2, func(int) {
			if _, err := p.start(); err != nil {
				smu.Lock()
				startErr = err
				smu.Unlock()
			}
		})
		if startErr != nil {
			env.fail("starting worker processes: %v", startErr)
			p.closeAll()
			return
		}
	}

	// Phase 1: faults on.
	stop := make(chan struct{})
	l := &load{env: env}
	var loaded sync.WaitGroup
	loaded.Add(1)
	go func() {
		defer loaded.Done()
		l.run(ctx, env.Clients, mk, 2*ttl/5, stop)
	}()
	var fed []Order
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
				o := env.Order(chaosWorkerOrders+j, "")
				fed = append(fed, o)
				for i := 0; i < 2; i++ { // on two workers at once: they race
					if w := p.victim(j + i); w != nil {
						w.Submit(o)
					}
				}
				if faults.Pause(ctx, 2*ttl/5) != nil {
					return
				}
			}
		}()
	}
	begun := time.Now()
	var nemesis sync.WaitGroup
	for _, ev := range live {
		if ev.Kind == chaosClientPause || ev.Kind == chaosClientCrash || ev.Kind == chaosWorkerKillAt {
			continue // armed at their failpoints
		}
		nemesis.Add(1)
		go func(ev chaosEvent) {
			defer nemesis.Done()
			if faults.Pause(ctx, time.Until(begun.Add(ev.At))) != nil {
				return
			}
			chaosInject(ctx, env, ev, p, sf, proxy)
		}(ev)
	}
	nemesis.Wait()
	_ = faults.Pause(ctx, time.Until(begun.Add(chaosWindow*ttl)))

	// Phase 2: heal everything, then let the load run on a healthy system.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	if proxy != nil {
		if err := proxy.Heal(); err != nil {
			env.fail("healing the network: %v", err)
		}
	}
	if sf != nil {
		if err := sf.Heal(hctx); err != nil {
			env.fail("healing the server: %v", err)
		}
	}
	cancel()
	_ = faults.Pause(ctx, 2*ttl)
	close(stop)
	loaded.Wait()
	if p != nil {
		p.closeAll()
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
		env.fail("%d orders without an answer after the faults were healed (first %s)", len(left), left[0].ID)
	}
}

// chaosClientFaults fires each planned client fault once, at its failpoint
// on its order's key, in whichever client reaches it (the key's owner).
type chaosClientFaults struct {
	env   *Env
	mu    sync.Mutex
	armed map[string]chaosEvent // failpoint + key
}

// handler is the failpoint handler of one client.
func (cf *chaosClientFaults) handler(client int) faults.Handler {
	return faults.HandlerFunc(func(ctx context.Context, name string) error {
		key := keyOf(ctx)
		id := name + "\x00" + key.String()
		cf.mu.Lock()
		ev, ok := cf.armed[id]
		delete(cf.armed, id)
		cf.mu.Unlock()
		if !ok {
			return nil
		}
		h := cf.env.Hist
		f := Fault{Client: client, Key: key, Failpoint: name, Start: h.Now()}
		if ev.Kind == chaosClientCrash {
			f.Kind, f.End = "crash", f.Start
			h.AddFault(f)
			return faults.ErrCrashed
		}
		f.Kind = "pause"
		err := faults.Pause(ctx, ev.For)
		f.End = h.Now()
		h.AddFault(f)
		return err
	})
}

// chaosInject injects one timed fault and, for those with a duration,
// undoes it when its time is up.
func chaosInject(ctx context.Context, env *Env, ev chaosEvent, p *pool, sf *ServerFaults, proxy *netfault.Proxy) {
	switch {
	case ev.Kind == chaosWorkerKill:
		if w := p.victim(ev.Slot); w != nil {
			w.Kill("", stores.KeyRef{})
		}
	case ev.Kind == chaosServerPause:
		f := Fault{Client: -1, Kind: FaultServerPause, Failpoint: "server", Start: env.Hist.Now()}
		if err := sf.Pause(ctx); err != nil {
			env.fail("%v", err)
			return
		}
		_ = faults.Pause(ctx, ev.For)
		err := sf.Resume(context.WithoutCancel(ctx))
		f.End = env.Hist.Now()
		env.Hist.AddFault(f)
		if err != nil {
			env.fail("%v", err)
		}
	case ev.Kind == chaosServerRestart:
		f := Fault{Client: -1, Kind: FaultServerRestart, Failpoint: "server", Start: env.Hist.Now()}
		_, err := sf.Restart(context.WithoutCancel(ctx))
		f.End = env.Hist.Now()
		env.Hist.AddFault(f)
		if err != nil {
			env.fail("%v", err)
		}
	default: // a network fault
		kind := ev.Kind[len(chaosNet):]
		var err error
		switch kind {
		case netfault.KindLatency:
			err = proxy.Latency(ttl4(env)/2, ttl4(env)/4)
		case netfault.KindReset:
			err = proxy.ResetConnections()
		case netfault.KindLostReply:
			err = proxy.LoseReplies()
		}
		if err != nil {
			env.fail("network fault %s: %v", kind, err)
			return
		}
		f := Fault{Client: -1, Kind: "net-" + kind, Failpoint: "network", Start: env.Hist.Now()}
		_ = faults.Pause(ctx, ev.For)
		err = proxy.Heal()
		f.End = env.Hist.Now()
		env.Hist.AddFault(f)
		if err != nil {
			env.fail("healing network fault %s: %v", kind, err)
		}
	}
}

// ttl4 is a quarter of LockTTL: the network latency of the chaos scenario
// (well below LockTTL, so latency alone never makes a claim stale).
func ttl4(env *Env) time.Duration { return env.Config.LockTTL / 4 }
