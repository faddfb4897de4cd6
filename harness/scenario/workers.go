package scenario

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/worker"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// waitAnswered waits until every order has a definite answer in the
// history, or idle says nothing more will come, or stall passes with no
// new order answered; it returns the orders still unanswered. The wait
// is on progress, not on the clock: a run of many orders on a slow
// machine answers them for minutes (454 orders on Redis under a soak
// outlasted a fixed 34 s and ended undecided), while a stuck one stops
// answering.
func waitAnswered(ctx context.Context, env *Env, orders []workload.Order, idle func() bool, stall time.Duration) []workload.Order {
	end := time.Now().Add(stall)
	lastLeft := len(orders) + 1
	want := map[stores.KeyRef]bool{}
	for _, o := range orders {
		want[o.Key] = true
	}
	for {
		// Idle is asked before the answers are read: a worker's answer is
		// in the history before the worker stops being busy, so an idle
		// pool's answers are all read below. Asked after, it could see an
		// answer that came between, which the read missed: an answered
		// order then counted as left (a workers run on Redis, beside a
		// loaded machine, ended undecided so).
		wasIdle := idle()
		done := map[string]bool{}
		for _, a := range env.Hist.Answers() {
			if want[a.Key] && a.Definite() {
				done[a.Order] = true
			}
		}
		var left []workload.Order
		for _, o := range orders {
			if !done[o.ID] {
				left = append(left, o)
			}
		}
		if len(left) < lastLeft {
			lastLeft, end = len(left), time.Now().Add(stall)
		}
		if len(left) == 0 || time.Now().After(end) || ctx.Err() != nil || wasIdle {
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
// A worker at a failpoint of the backend's own (inside its Begin's
// transaction), or between a split Begin's read and its write, and not
// killed there is held for workerHold: the other process sending the
// order meets a writer of another process holding the store's lock, which
// the store must wait out (a SQLite busy timeout) and answer, not fail,
// or reads what the first has not written yet; what one process
// serializes in its memory does not reach another.
func runWorkers(ctx context.Context, env *Env) {
	announce := workerFailpoints(env.Backend())
	plan := nemesis.WorkerKills(env.PlanRand("workers"), env.Keys, announce)
	hold := map[string]bool{faults.BeginAfterSelect: true} // a split Begin's read (mutants only)
	for _, fp := range env.Backend().Failpoints {
		hold[fp] = true
	}
	announce = append(slices.Clone(announce), faults.BeginAfterSelect)
	calls := map[int]bool{}
	for _, k := range plan {
		switch {
		case k.Failpoint != "":
			env.Note("%s: kill the worker at %s on order %d", env.Tenant, k.Failpoint, k.Order)
		case k.Call > 0:
			env.Note("%s: kill the worker making store call #%d of the round, in flight", env.Tenant, k.Call)
			calls[k.Call] = true
		default:
			env.Note("%s: kill live worker #%d at +%v", env.Tenant, k.Victim, k.At)
		}
	}
	var ncalls int
	unfiredCalls := maps.Clone(calls) // the calls to kill in flight that no worker has made yet
	var missed []string               // planned kills that did not happen, or happened to an idle round
	orders := make([]workload.Order, env.Keys)
	for i := range orders {
		orders[i] = env.Order(i, "")
	}
	var mu sync.Mutex
	kills := nemesis.NewKillList()
	for _, k := range plan {
		if k.Failpoint != "" {
			kills.Arm(k.Failpoint, orders[k.Order].Key)
		}
	}
	var passed sync.Map // the failpoints some worker passed, on any key
	p := env.WorkerPool(ctx, worker.Options{
		Announce: announce,
		Decide: func(w *worker.Worker, fp string, key stores.KeyRef) worker.Action {
			passed.Store(fp, true)
			if act := kills.Decide(w, fp, key); act.Kill || !hold[fp] {
				return act
			}
			return worker.Action{Hold: workerHold}
		},
		OnCall: func(w *worker.Worker, op history.Op) bool {
			mu.Lock()
			defer mu.Unlock()
			ncalls++
			delete(unfiredCalls, ncalls)
			if !calls[ncalls] {
				return false
			}
			// Killed here, so that a worker already dying from an
			// earlier kill (a call it sent before it died), which this
			// kill would not kill, moves the kill to the next call a
			// live worker makes (past the calls planned for other kills).
			if w.Kill("", op.Input.Key) {
				return true
			}
			next := ncalls + 1
			for calls[next] {
				next++
			}
			calls[next], unfiredCalls[next] = true, true
			return false
		},
	})
	n := env.Clients
	if n > 3 {
		n = 3
	}
	if n < 2 {
		n = 2
	}
	ws := make([]*worker.Worker, n)
	var startErr error
	var smu sync.Mutex
	parallel(n, func(i int) {
		w, err := p.Start()
		smu.Lock()
		defer smu.Unlock()
		if err != nil && startErr == nil {
			startErr = err
		}
		ws[i] = w
	})
	if startErr != nil {
		env.Fail("starting worker processes: %v", startErr)
		p.CloseAll()
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
		go func(k nemesis.WorkerKill) {
			defer killers.Done()
			if faults.Pause(ctx, time.Until(begun.Add(k.At))) != nil {
				return
			}
			killed, idle, why := killVictim(ctx, p, k.Victim)
			if ctx.Err() != nil {
				return
			}
			if !killed || idle {
				if idle {
					why = "no worker had an order in hand"
				}
				mu.Lock()
				missed = append(missed, fmt.Sprintf("live worker #%d at +%v (%s)", k.Victim, k.At, why))
				mu.Unlock()
			}
		}(k)
	}
	killers.Wait()
	if left := waitAnswered(ctx, env, orders, p.Idle, 30*time.Second+10*env.Config.LockTTL); len(left) > 0 {
		env.Fail("%d orders unanswered by the worker processes (first %s)", len(left), left[0].ID)
	}
	p.CloseAll()
	if ctx.Err() != nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range slices.Sorted(maps.Keys(unfiredCalls)) {
		missed = append(missed, fmt.Sprintf("in flight at store call #%d (the round made %d)", c, ncalls))
	}
	for _, k := range kills.Unfired() {
		fp, _, _ := strings.Cut(k, " on ")
		if _, ok := passed.Load(fp); !ok {
			// A failpoint the store names in its hello and may pass in
			// some of its variants only (the JavaScript example's
			// begin.after-select, in its select-then-insert).
			k += " (no worker passed " + fp + " in this round)"
		}
		missed = append(missed, "at "+k)
	}
	if len(missed) > 0 {
		env.NotTested("workers: %d of %d planned worker kills did not happen or found every worker idle, so what they meant to interrupt was not tested: %s", len(missed), len(plan), strings.Join(missed, "; "))
	}
	// Each order goes to two workers, to race its key across processes
	// (those whose queues reach it at once): on a loaded machine none
	// may, and a lock in one process's memory passed saying nothing.
	keys := map[stores.KeyRef]string{}
	for _, o := range orders {
		keys[o.Key] = o.ID
	}
	if n := len(unraced(env, keys)); n > 0 && n == len(keys) {
		env.NotTested("workers: on no key were two of its Begins in the store at once (each key's two worker processes came one after the other), so the race between processes was not tested: %d of %d orders", n, env.Keys)
	}
}

// liveVictim returns p's i-th live worker (worker.Pool.Victim) for a kill
// at a moment, and whether the pool was idle. At that moment every worker
// may be dead and being replaced (killed at failpoints): it waits for a
// live one while orders are left (victimWait at most), rather than let
// the kill not happen. nil: none came, or ctx ended.
func liveVictim(ctx context.Context, p *worker.Pool, i int) (w *worker.Worker, idle bool) {
	w, idle = p.Victim(i), p.Idle()
	for waited := time.Duration(0); w == nil && !idle && waited < victimWait; waited += victimPoll {
		if faults.Pause(ctx, victimPoll) != nil {
			return nil, idle
		}
		w, idle = p.Victim(i), p.Idle()
	}
	return w, idle
}

// killVictim kills p's i-th live worker at a moment (liveVictim). A
// victim may be killed by another kill between its choice and this one,
// which then kills nothing: it chooses again, victimTries times at most.
// It returns whether it killed one, whether the pool was idle then, and,
// if it killed none, why.
func killVictim(ctx context.Context, p *worker.Pool, i int) (killed, idle bool, why string) {
	for range victimTries {
		var w *worker.Worker
		if w, idle = liveVictim(ctx, p, i); w == nil {
			return false, idle, fmt.Sprintf("no worker was alive for %v", victimWait)
		}
		if w.Kill("", stores.KeyRef{}) {
			return true, idle, ""
		}
	}
	return false, idle, fmt.Sprintf("each of %d victims was killed by another kill first", victimTries)
}

// victimWait bounds how long a kill at a moment waits for a live worker
// while every one is being replaced (a worker process starts in about
// 100-200 ms); victimPoll is how often it looks; victimTries bounds how
// often it chooses again when its victim was killed by another kill
// first.
const (
	victimWait  = 10 * time.Second
	victimPoll  = 5 * time.Millisecond
	victimTries = 5
)

// workerHold is how long a worker is held at a failpoint inside its
// store's transaction: long enough for the other worker sending the order
// to meet the lock held, far inside any store's wait for a lock (SQLite's
// busy timeout is seconds; check.AvailabilityPatience).
const workerHold = 25 * time.Millisecond

// workerFailpoints are the failpoints worker processes announce: the Run
// flow's, and the backend's own (SQLite's inside Begin's transaction, where
// a worker killed holds the file's write lock).
func workerFailpoints(b stores.Backend) []string {
	return append([]string{faults.RunAfterClaim, faults.RunAfterWork}, b.Failpoints...)
}
