package harness

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Scenario is a named workload with its faults, like a Jepsen workload.
type Scenario struct {
	Name string
	// Doc says in a line what the scenario does and which bugs it exposes.
	Doc string
	// Retention overrides the store's retention for this scenario (0: the
	// run's default).
	Retention time.Duration
	// Needs names what the scenario needs beyond a Store (a server it can
	// pause, a store worker processes can open); "" for none. idemtest
	// skips such scenarios for stores from a Factory.
	Needs string
	// Skip, if set, says why the scenario cannot run with these options
	// (the memory store cannot be shared with worker processes; a server
	// from a DSN cannot be paused); "" means it can. A skipped scenario
	// reports its reason, verdict "skipped", and counts as neither pass
	// nor fail.
	Skip func(Options) string
	run  func(ctx context.Context, env *Env)
}

// Scenarios lists every scenario, in the order `all` runs them.
var Scenarios = []Scenario{
	{Name: "race", Doc: "every client sends the same order at once, with the read-to-write window widened: one owner, the rest 409 or replay", run: runRace},
	{Name: "takeover", Doc: "an owner pauses past LockTTL; others take over; the stale owner's save or release must be fenced", run: runTakeover},
	{Name: "crash", Doc: "an owner crashes after its claim or its work and never cleans up; after LockTTL another takes over", run: runCrash},
	{Name: "error", Doc: "the work fails (after charging); release-on-error and save-error policies on half the keys each", run: runError},
	{Name: "mismatch", Doc: "the key is reused with other parameters, during and after the first request: always 422, never run", run: runMismatch},
	{Name: "retention", Doc: "keys are pruned while clients retry inside the retry window: every retry must replay", Retention: 1200 * time.Millisecond, run: runRetention},
}

// LookupScenario returns the named scenario.
func LookupScenario(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Env is what a scenario runs with: the store, the history and ledger it
// records into, and the run's parameters.
type Env struct {
	Store   stores.Store
	Config  stores.Config
	Hist    *History
	Ledger  *Ledger
	Clients int
	Keys    int
	Seed    int64
	Tenant  string
	rand    *rand.Rand
	clock   faults.Clock
	nextID  int
	mu      sync.Mutex

	// What fault scenarios need besides (workers_*.go, chaos.go,
	// scenarios_store.go): the run's options, where the store lives, how far
	// the model must widen its time boundaries, and notes for the result.
	opts       Options
	storeAddr  string   // the address Options.Open gave the store
	incomplete []string // why the workload could not finish, if it could not
	schedule   []string // the fault schedule, printed with the result

	// Counts a scenario adds to its result (scenarios_net.go,
	// scenarios_skew.go): faults injected that the history does not record
	// one by one (network faults, counted by the proxy), and findings:
	// expected, counted effects that are not violations (a skewed clock
	// taking over a healthy owner).
	counted  map[string]int
	findings map[string]int
}

// Order makes the i-th order of the scenario (fingerprint variant v).
func (e *Env) Order(i int, v string) Order {
	amount := 1000 + 7*i
	id := fmt.Sprintf("o%03d", i)
	return Order{ID: id, Key: stores.KeyRef{Tenant: e.Tenant, Key: "order-" + id},
		Fingerprint: fmt.Sprintf("amount=%d%s", amount, v), Amount: amount}
}

// NewClient makes a client with the default retry policy and the given
// failpoint rules. Client ids are handed out in order.
func (e *Env) NewClient(rules ...Rule) *Client {
	id := e.newClientID()
	e.mu.Lock()
	seed := e.rand.Int63()
	e.mu.Unlock()
	c := &Client{
		ID: id, Clock: e.clock, Hist: e.Hist, Ledger: e.Ledger,
		Store:           &Recorder{Store: e.Store, Client: id, Hist: e.Hist, Clock: e.clock},
		Plan:            NewPlan(id, e.Hist, rules...),
		Keys:            SameKey,
		DownstreamKeyed: true,
		MaxAttempts:     25,
		Backoff:         10 * time.Millisecond,
		MaxBackoff:      e.Config.LockTTL / 3,
		WorkTime:        3 * time.Millisecond,
		Rand:            rand.New(rand.NewSource(seed)),
	}
	e.applyWorkload(c) // a client-side mutant's workload option (mutants_client.go)
	return c
}

// newClientID hands out the next client id (worker processes get theirs
// from the same sequence).
func (e *Env) newClientID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := e.nextID
	e.nextID++
	return id
}

// jitter returns a random duration in [0, d).
func (e *Env) jitter(d time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Duration(e.rand.Int63n(int64(d) + 1))
}

// parallel runs f(i) for i in [0, n) at once and waits for all.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f(i)
		}(i)
	}
	wg.Wait()
}

// widen pauses every client briefly between a read and the write that
// depends on it: a no-op for a store that decides in one atomic step.
func widen() Rule {
	return Rule{Failpoint: faults.BeginAfterSelect, Action: PauseFor(3 * time.Millisecond)}
}

func runRace(ctx context.Context, env *Env) {
	clients := make([]*Client, env.Clients)
	for i := range clients {
		clients[i] = env.NewClient(widen())
	}
	for k := 0; k < env.Keys; k++ {
		o := env.Order(k, "")
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Add(1)
			go func(c *Client) {
				defer wg.Done()
				<-start
				c.Submit(ctx, o)
			}(c)
		}
		close(start)
		wg.Wait()
	}
}

// runTakeover: per key, owner A pauses past LockTTL (after its claim or
// after its work; on some keys its work then fails, so it releases), while
// B and C retry and take over at the same moment.
func runTakeover(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		at := faults.RunAfterWork
		if k%2 == 1 {
			at = faults.RunAfterClaim
		}
		a := env.NewClient(Rule{Failpoint: at, Action: PauseFor(2*ttl + env.jitter(ttl/2)), Times: 1, Key: o.Key})
		if k%4 == 3 {
			a.FailWork = func(Order, int) bool { return true } // paused, then fails: a stale release
			a.MaxAttempts = 1
		}
		b, c := env.NewClient(widen()), env.NewClient(widen())
		parallel(3, func(i int) {
			switch i {
			case 0:
				a.Submit(ctx, o)
			case 1:
				time.Sleep(ttl / 5)
				b.Submit(ctx, o)
			case 2:
				time.Sleep(ttl / 5)
				c.Submit(ctx, o)
			}
		})
	})
}

// runCrash: per key, owner A crashes after its claim or after its work and
// never cleans up; B retries until it can take over.
func runCrash(ctx context.Context, env *Env) {
	ttl := env.Config.LockTTL
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		at := []string{faults.RunAfterClaim, faults.RunAfterWork}[k%2]
		a := env.NewClient(Rule{Failpoint: at, Action: Crash(), Times: 1, Key: o.Key})
		b := env.NewClient()
		a.Submit(ctx, o)
		time.Sleep(ttl/10 + env.jitter(ttl/10))
		b.Submit(ctx, o)
	})
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
			c.FailWork = func(_ Order, attempt int) bool { return attempt <= 2 }
			time.Sleep(env.jitter(5 * time.Millisecond))
			c.Submit(ctx, o)
		})
	})
}

// runMismatch: per key, the first request runs while others reuse the key
// with other parameters, during and after it.
func runMismatch(ctx context.Context, env *Env) {
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		other := env.Order(k, "&currency=eur")
		owner := env.NewClient()
		owner.WorkTime = 20 * time.Millisecond
		parallel(3, func(i int) {
			if i == 0 {
				owner.Submit(ctx, o)
				return
			}
			time.Sleep(time.Duration(i) * 10 * time.Millisecond)
			env.NewClient().Submit(ctx, other)
		})
		env.NewClient().Submit(ctx, other)
		env.NewClient().Submit(ctx, o)
	})
}

// runRetention: orders complete; a pruner runs throughout; clients retry
// each order inside the retry window (well inside the retention) and must
// get the replay.
func runRetention(ctx context.Context, env *Env) {
	ret := env.Config.Retention
	stop := make(chan struct{})
	var pruned sync.WaitGroup
	pruned.Add(1)
	pruner := &Recorder{Store: env.Store, Client: env.NewClient().ID, Hist: env.Hist, Clock: env.clock}
	go func() {
		defer pruned.Done()
		t := time.NewTicker(ret / 8)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_, _ = pruner.Prune(ctx, env.clock.Now())
			}
		}
	}()
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		env.NewClient().Submit(ctx, o)
		retry := env.NewClient()
		for i := 0; i < 2; i++ { // at 0.3 and 0.6 of the retention
			time.Sleep(ret * 3 / 10)
			retry.Submit(ctx, o)
		}
	})
	close(stop)
	pruned.Wait()
	// Past the retention, the store must have let the keys go.
	time.Sleep(ret + ret/4)
	_, _ = pruner.Prune(ctx, env.clock.Now())
}
