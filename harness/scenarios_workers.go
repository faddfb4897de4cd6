package harness

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand"
	"sort"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

func init() {
	// One init for the three fault scenarios of this package's files, so
	// that `all` runs them in this order, after the others.
	Scenarios = append(Scenarios,
		Scenario{Name: "workers", Needs: "worker processes", Skip: WorkersSkip, run: runWorkers,
			Doc: "clients run in worker processes that are killed with SIGKILL at failpoints and at random moments: their claims are taken over after LockTTL, never lost, never doubled"},
		Scenario{Name: "store-faults", Needs: "a server it can pause and restart", Skip: ServerFaultsSkip, run: runStoreFaults,
			Doc: "the server is paused, then killed with SIGKILL and restarted, under load: calls during the outage are unknown outcomes; after healing every order is answered and no claim or answer was lost"},
		Scenario{Name: "chaos", run: runChaos,
			Doc: "a random mix of every fault (client pauses and crashes, worker kills, server pause and restart, network faults) in Jepsen-style phases: faults on, healed, quiet retries; the schedule is a pure function of the seed"},
	)
}

// killList arms worker kills at (failpoint, key) pairs: each fires once,
// the first time a worker announces that failpoint on that key.
type killList struct {
	mu    sync.Mutex
	armed map[string]bool
}

func newKillList() *killList { return &killList{armed: map[string]bool{}} }

func (l *killList) arm(failpoint string, key stores.KeyRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed[failpoint+"\x00"+key.String()] = true
}

// decide is a WorkerOptions.Decide: kill the worker at an armed point.
func (l *killList) decide(_ *Worker, failpoint string, key stores.KeyRef) WorkerAction {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := failpoint + "\x00" + key.String()
	if l.armed[id] {
		delete(l.armed, id)
		return WorkerAction{Kill: true}
	}
	return WorkerAction{}
}

// note records a line of the scenario's fault schedule.
func (e *Env) note(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.schedule = append(e.schedule, fmt.Sprintf(format, args...))
}

// fail records why the scenario's workload could not finish (the verdict
// is then unknown unless a checker failed).
func (e *Env) fail(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.incomplete = append(e.incomplete, fmt.Sprintf(format, args...))
}

// workerKill is a planned kill of a worker process: at a failpoint on an
// order's key, at the Call-th store call any worker makes (in flight), or
// at a moment (At) after the round began.
type workerKill struct {
	Failpoint string
	Order     int
	Call      int
	At        time.Duration
	Victim    int // index among the live workers, for kills at a moment
}

// workerFailpoints are the failpoints worker processes announce: the Run
// flow's, and the backend's own (SQLite's inside Begin's transaction, where
// a worker killed holds the file's write lock).
func workerFailpoints(b stores.Backend) []string {
	return append([]string{faults.RunAfterClaim, faults.RunAfterWork}, b.Failpoints...)
}

// planRand is the PRNG a fault scenario draws its schedule from: a
// function of the seed, the scenario and the round only (not of which
// other scenarios ran before), so the schedule replays with the seed.
func planRand(e *Env, scenario string) *rand.Rand {
	round := 0
	fmt.Sscanf(e.Tenant, "t%d", &round)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%d", scenario, e.Seed, round)
	return rand.New(rand.NewSource(int64(h.Sum64())))
}

// planWorkerKills draws the round's kills: one at each failpoint, on
// distinct orders, two in flight, and two at random moments.
func planWorkerKills(e *Env, backend stores.Backend) []workerKill {
	r := planRand(e, "workers")
	var plan []workerKill
	perm := r.Perm(e.Keys)
	for i, fp := range workerFailpoints(backend) {
		plan = append(plan, workerKill{Failpoint: fp, Order: perm[i%len(perm)]})
	}
	// In flight: two distinct calls among the first ones of the round.
	c1 := 1 + r.Intn(2*e.Keys)
	c2 := c1 + 1 + r.Intn(2*e.Keys)
	plan = append(plan, workerKill{Call: c1}, workerKill{Call: c2})
	for i := 0; i < 2; i++ {
		plan = append(plan, workerKill{At: time.Duration(20+r.Intn(200)) * time.Millisecond, Victim: r.Intn(8)})
	}
	return plan
}

// pool runs orders on worker processes: it replaces each killed worker and
// hands the new one the orders the dead one left unanswered.
type pool struct {
	env      *Env
	ctx      context.Context
	wo       WorkerOptions
	mu       sync.Mutex
	live     []*Worker
	starting int  // workers being started
	closing  bool // no more replacements
	wg       sync.WaitGroup
}

func newPool(ctx context.Context, env *Env, wo WorkerOptions) *pool {
	return &pool{env: env, ctx: ctx, wo: wo}
}

// start starts a worker and watches it; it reports a failure to start.
func (p *pool) start() (*Worker, error) {
	p.mu.Lock()
	p.starting++
	p.mu.Unlock()
	return p.started()
}

// started starts a worker whose start was already counted in p.starting.
// A start that fails (the server is down, so the store cannot be opened)
// is tried again for a while, as a supervisor restarts a crashed process.
func (p *pool) started() (*Worker, error) {
	var w *Worker
	var err error
	for end := time.Now().Add(time.Minute); ; {
		if w, err = p.env.StartWorker(p.ctx, p.wo); err == nil || time.Now().After(end) || p.ctx.Err() != nil {
			break
		}
		_ = faults.Pause(p.ctx, 200*time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	if err != nil {
		return nil, err
	}
	p.live = append(p.live, w)
	p.wg.Add(1)
	go p.watch(w)
	return w, nil
}

// watch waits for a worker to end; a killed one is replaced.
func (p *pool) watch(w *Worker) {
	defer p.wg.Done()
	<-w.Done()
	p.mu.Lock()
	for i, x := range p.live {
		if x == w {
			p.live = append(p.live[:i], p.live[i+1:]...)
			break
		}
	}
	left := w.Unanswered()
	replace := w.Killed() && !p.closing && p.ctx.Err() == nil && len(left) > 0
	if replace {
		p.starting++ // before unlocking, so closeAll waits for it
	}
	p.mu.Unlock()
	if err := w.Err(); err != nil {
		p.env.fail("%v", err)
	}
	if !replace {
		return
	}
	r, err := p.started()
	if err != nil {
		p.env.fail("replacing killed worker %d: %v", w.ID, err)
		return
	}
	for _, o := range left {
		r.Submit(o)
	}
}

// victim returns the i-th live worker (modulo how many live), or nil.
func (p *pool) victim(i int) *Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.live) == 0 {
		return nil
	}
	ws := append([]*Worker(nil), p.live...)
	sort.Slice(ws, func(a, b int) bool { return ws[a].ID < ws[b].ID })
	return ws[i%len(ws)]
}

// closeAll tells every live worker to finish, and waits for every worker
// (and replacement) to end.
func (p *pool) closeAll() {
	for {
		p.mu.Lock()
		p.closing = true
		live := append([]*Worker(nil), p.live...)
		p.mu.Unlock()
		for _, w := range live {
			w.Close()
		}
		for _, w := range live {
			<-w.Done()
		}
		p.mu.Lock()
		n := len(p.live) + p.starting
		p.mu.Unlock()
		if n == 0 {
			break
		}
		if len(live) == 0 {
			time.Sleep(10 * time.Millisecond) // a replacement is starting
		}
	}
	p.wg.Wait()
}

// idle reports whether no worker has an order left to run and none is
// being started: nothing more will be answered.
func (p *pool) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.starting > 0 {
		return false
	}
	for _, w := range p.live {
		if w.Busy() {
			return false
		}
	}
	return true
}

// waitAnswered waits until every order has a definite answer in the
// history, or done says nothing more will come, or the deadline passes; it
// returns the orders still unanswered.
func waitAnswered(ctx context.Context, env *Env, orders []Order, idle func() bool, deadline time.Duration) []Order {
	end := time.Now().Add(deadline)
	for {
		done := map[string]bool{}
		for _, a := range env.Hist.Answers() {
			if a.Key.Tenant == env.Tenant && a.definite() {
				done[a.Order] = true
			}
		}
		var left []Order
		for _, o := range orders {
			if !done[o.ID] {
				left = append(left, o)
			}
		}
		if len(left) == 0 || time.Now().After(end) || ctx.Err() != nil || idle() {
			return left
		}
		_ = faults.Pause(ctx, 20*time.Millisecond)
	}
}

// runWorkers: orders run on worker processes, each order on two of them at
// once (so they race for its key). Planned kills stop workers with SIGKILL
// at failpoints (after the claim, after the work, inside SQLite's Begin
// transaction) and at random moments; each dead worker is replaced by a new
// one that retries its unanswered orders with the same keys. Every order
// must end with one answer for all, its claim taken over after LockTTL.
func runWorkers(ctx context.Context, env *Env) {
	backend := env.opts.Backend
	plan := planWorkerKills(env, backend)
	calls := map[int]bool{}
	for _, k := range plan {
		switch {
		case k.Failpoint != "":
			env.note("%s: kill the worker at %s on order %d", env.Tenant, k.Failpoint, k.Order)
		case k.Call > 0:
			env.note("%s: kill the worker making store call #%d of the round, in flight", env.Tenant, k.Call)
			calls[k.Call] = true
		default:
			env.note("%s: kill live worker #%d at +%v", env.Tenant, k.Victim, k.At)
		}
	}
	var ncalls int
	orders := make([]Order, env.Keys)
	for i := range orders {
		orders[i] = env.Order(i, "")
	}
	var mu sync.Mutex
	kills := newKillList()
	for _, k := range plan {
		if k.Failpoint != "" {
			kills.arm(k.Failpoint, orders[k.Order].Key)
		}
	}
	p := newPool(ctx, env, WorkerOptions{
		Announce: workerFailpoints(backend),
		Decide:   kills.decide,
		OnCall: func(w *Worker, op Op) bool {
			mu.Lock()
			defer mu.Unlock()
			ncalls++
			return calls[ncalls]
		},
	})
	n := env.Clients
	if n > 3 {
		n = 3
	}
	if n < 2 {
		n = 2
	}
	ws := make([]*Worker, n)
	var startErr error
	var smu sync.Mutex
	parallel(n, func(i int) {
		w, err := p.start()
		smu.Lock()
		defer smu.Unlock()
		if err != nil && startErr == nil {
			startErr = err
		}
		ws[i] = w
	})
	if startErr != nil {
		env.fail("starting worker processes: %v", startErr)
		p.closeAll()
		return
	}
	begun := time.Now()
	for k, o := range orders {
		ws[k%n].Submit(o)
		ws[(k+1)%n].Submit(o)
	}
	var killers sync.WaitGroup
	for _, k := range plan {
		if k.Failpoint != "" || k.Call > 0 {
			continue
		}
		killers.Add(1)
		go func(k workerKill) {
			defer killers.Done()
			if faults.Pause(ctx, time.Until(begun.Add(k.At))) != nil {
				return
			}
			if w := p.victim(k.Victim); w != nil {
				w.Kill("", stores.KeyRef{})
			}
		}(k)
	}
	killers.Wait()
	if left := waitAnswered(ctx, env, orders, p.idle, 30*time.Second+10*env.Config.LockTTL); len(left) > 0 {
		env.fail("%d orders unanswered by the worker processes (first %s)", len(left), left[0].ID)
	}
	p.closeAll()
}
