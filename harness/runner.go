package harness

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Options configure one run of scenarios against one store variant.
type Options struct {
	Backend stores.Backend
	Variant string
	// Addr is where the backend lives: a directory for SQLite files, a DSN
	// for Postgres, host:port for Redis; memory ignores it.
	Addr      string
	Clients   int
	Keys      int
	Seed      int64
	Duration  time.Duration // run rounds of each scenario until it elapses (0: one round)
	LockTTL   time.Duration
	Retention time.Duration
	Scenarios []string
	// Progress, if set, hears where the run is: when a scenario starts,
	// every ProgressEvery while it runs, and when it ends.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// OpenStore, if set, opens the store for each scenario instead of
	// Backend.Open: how idemtest runs a store from outside the registry.
	OpenStore func(ctx context.Context, scenario string, cfg stores.Config) (stores.Store, error)
	// Server is the Postgres or Redis server behind Addr, if known: the
	// store-faults and chaos scenarios pause, kill and restart it when it
	// is Managed (a container this process started), and skip those
	// faults, saying why, otherwise.
	Server *servers.Server
	// WorkerCommand starts an `idemcheck worker` process (argv), for the
	// scenarios that run clients in processes the harness kills; empty
	// means no worker processes (those scenarios skip, or do without).
	WorkerCommand []string
}

// Progress reports where a run is.
type Progress struct {
	Scenario string
	Index    int // 1-based
	Total    int
	// Ops and Faults count the store calls and injected faults of the
	// current scenario so far.
	Ops    int
	Faults int
	// Violations counts the violations found so far in the whole run
	// (a scenario's are known when it ends).
	Violations int
	Done       bool
}

// DefaultOptions are the parameters `idemcheck check` runs with.
func DefaultOptions() Options {
	return Options{Variant: stores.Correct, Clients: 6, Keys: 8, Seed: 1,
		LockTTL: 250 * time.Millisecond, Retention: 10 * time.Second}
}

// Validate reports options no run can use.
func (o Options) Validate() error {
	switch {
	case o.Clients < 1:
		return fmt.Errorf("--clients must be at least 1, got %d", o.Clients)
	case o.Keys < 1:
		return fmt.Errorf("--keys must be at least 1, got %d", o.Keys)
	case o.Duration < 0:
		return fmt.Errorf("--duration must not be negative, got %v", o.Duration)
	case !o.Backend.HasVariant(o.Variant) && !IsClientMutant(o.Variant):
		return fmt.Errorf("store %s has no variant %q (known: %v, and the client-side %v)", o.Backend.Name, o.Variant, o.Backend.Variants(), ClientMutantNames())
	}
	for _, s := range o.Scenarios {
		if _, ok := LookupScenario(s); !ok {
			return fmt.Errorf("unknown scenario %q (known: %s)", s, scenarioNames())
		}
	}
	return stores.Config{LockTTL: o.LockTTL, Retention: o.Retention}.Validate()
}

func scenarioNames() string {
	var b bytes.Buffer
	for i, s := range Scenarios {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s.Name)
	}
	return b.String()
}

// ScenarioResult is one scenario's outcome and what it measured.
type ScenarioResult struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	Ops     int     `json:"ops"` // store calls
	Rounds  int     `json:"rounds"`
	Clients int     `json:"clients"` // clients that took part
	Keys    int     `json:"keys"`
	// MaxConcurrentBegins is the most Begin calls in flight at once on one
	// key: proof the scenario raced for real.
	MaxConcurrentBegins int            `json:"max_concurrent_begins"`
	WorkRuns            int            `json:"work_runs"`
	Charges             int            `json:"charges"`
	Faults              map[string]int `json:"faults"`
	Outcomes            map[string]int `json:"outcomes"`
	Seconds             float64        `json:"seconds"`
	Checkers            []CheckResult  `json:"checkers"`
	Violations          []Violation    `json:"violations"`
	Error               string         `json:"error,omitempty"`
	hist                *History       `json:"-"`
	ledger              *Ledger        `json:"-"`
	visualization       *bytes.Buffer  `json:"-"`

	// Skipped says why the scenario did not run (its verdict is "skipped").
	Skipped string `json:"skipped,omitempty"`
	// Findings counts expected effects a scenario measures that are not
	// violations, e.g. skew_takeovers: healthy owners taken over by a
	// client whose clock runs ahead, which caller-clock stores allow.
	Findings map[string]int `json:"findings,omitempty"`
	// Schedule lists the faults the scenario planned, in order: a pure
	// function of the seed, so a failing run can be replayed.
	Schedule []string `json:"schedule,omitempty"`
}

// History returns the scenario's recorded history.
func (r *ScenarioResult) History() *History { return r.hist }

// Ledger returns the scenario's payment-provider ledger: every charge the
// work made, for reports that show a key's charges.
func (r *ScenarioResult) Ledger() *Ledger { return r.ledger }

// Summary is a whole run's outcome: what `--json` prints.
type Summary struct {
	Verdict    Verdict          `json:"verdict"`
	Store      string           `json:"store"`
	Variant    string           `json:"variant"`
	Seed       int64            `json:"seed"`
	Clients    int              `json:"clients"`
	Keys       int              `json:"keys"`
	LockTTL    string           `json:"lock_ttl"`
	Started    time.Time        `json:"started"`
	Seconds    float64          `json:"seconds"`
	Scenarios  []ScenarioResult `json:"scenarios"`
	Violations []Violation      `json:"violations"`
	Dir        string           `json:"results_dir,omitempty"`
}

// Run runs the scenarios one after another, each on a fresh store, and
// checks each. An error means the run could not be set up (the store could
// not be opened); violations are in the summary, not errors.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	names := o.Scenarios
	if len(names) == 0 {
		for _, s := range Scenarios {
			names = append(names, s.Name)
		}
	}
	sum := &Summary{Store: o.Backend.Name, Variant: o.Variant, Seed: o.Seed, Clients: o.Clients, Keys: o.Keys,
		LockTTL: o.LockTTL.String(), Started: time.Now(), Violations: []Violation{}}
	runID := time.Now().UnixNano() % 1_000_000_000
	for i, name := range names {
		sc, _ := LookupScenario(name)
		if sc.Skip != nil {
			if why := sc.Skip(o); why != "" {
				sum.Scenarios = append(sum.Scenarios, ScenarioResult{Name: name, Verdict: Skipped, Skipped: why,
					Faults: map[string]int{}, Outcomes: map[string]int{}, Checkers: []CheckResult{}, Violations: []Violation{}})
				continue
			}
		}
		report := func(Progress) {}
		if o.Progress != nil {
			found := len(sum.Violations)
			report = func(p Progress) {
				p.Scenario, p.Index, p.Total = name, i+1, len(names)
				p.Violations += found
				o.Progress(p)
			}
		}
		res, err := runScenario(ctx, o, sc, runID, int64(i), report)
		if err != nil {
			return nil, err
		}
		report(Progress{Ops: res.Ops, Faults: sumFaults(res.Faults), Violations: len(res.Violations), Done: true})
		sum.Scenarios = append(sum.Scenarios, *res)
		sum.Violations = append(sum.Violations, res.Violations...)
		if ctx.Err() != nil {
			break
		}
	}
	sum.Seconds = time.Since(sum.Started).Seconds()
	sum.Verdict = overall(sum.Scenarios)
	if ctx.Err() != nil && sum.Verdict == Pass {
		sum.Verdict = Unknown
	}
	return sum, nil
}

func sumFaults(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func overall(rs []ScenarioResult) Verdict {
	v := Pass
	for _, r := range rs {
		switch r.Verdict {
		case Fail:
			return Fail
		case Unknown:
			v = Unknown
		}
	}
	return v
}

// Open opens a fresh store of the run's backend for one scenario: its own
// SQLite file, Postgres schema or Redis key prefix.
func (o Options) Open(ctx context.Context, scenario string, runID int64, cfg stores.Config) (stores.Store, error) {
	cfg.Namespace = fmt.Sprintf("idem_%d_%s", runID, strings.ReplaceAll(scenario, "-", "_"))
	if o.OpenStore != nil {
		return o.OpenStore(ctx, scenario, cfg)
	}
	return o.Backend.Open(ctx, o.storeAddr(scenario, runID), cfg)
}

// storeAddr is where the scenario's store lives: its own SQLite file, or
// the server's address. Worker processes open the same.
func (o Options) storeAddr(scenario string, runID int64) string {
	if o.Backend.Lives == stores.File {
		return filepath.Join(o.Addr, fmt.Sprintf("%d-%s.db", runID, scenario))
	}
	return o.Addr
}

// Skipped is the verdict of a scenario that could not run with the run's
// options (ScenarioResult.Skipped says why); it is neither pass nor fail.
const Skipped Verdict = "skipped"

func runScenario(ctx context.Context, o Options, sc Scenario, runID, index int64, report func(Progress)) (*ScenarioResult, error) {
	cfg := stores.Config{LockTTL: o.LockTTL, Retention: o.Retention, Variant: o.StoreVariant()}
	if sc.Retention > 0 {
		cfg.Retention = sc.Retention
	}
	st, err := o.Open(ctx, sc.Name, runID, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", o.Backend.Name, err)
	}
	defer st.Close()
	env := &Env{Store: st, Config: cfg, Hist: NewHistory(), Ledger: NewLedger(), Clients: o.Clients, Keys: o.Keys,
		Seed: o.Seed, rand: rand.New(rand.NewSource(o.Seed*1000 + index)), clock: faults.RealClock{},
		opts: o, storeAddr: o.storeAddr(sc.Name, runID)}
	env.Config.Namespace = fmt.Sprintf("idem_%d_%s", runID, strings.ReplaceAll(sc.Name, "-", "_"))
	start := time.Now()
	report(Progress{})
	stopTicker := tick(o.ProgressEvery, func() {
		report(Progress{Ops: env.Hist.OpCount(), Faults: len(env.Hist.Faults())})
	})
	defer stopTicker()
	rounds := 0
	for {
		env.Tenant = fmt.Sprintf("t%d", rounds)
		sc.run(ctx, env)
		rounds++
		if o.Duration <= 0 || time.Since(start) >= o.Duration || ctx.Err() != nil {
			break
		}
	}
	probe := env.NewClient()
	quiet(ctx, env, probe.ID)
	res := &ScenarioResult{Name: sc.Name, Rounds: rounds, hist: env.Hist, ledger: env.Ledger}
	model := models.Config{LockTTL: cfg.LockTTL, Retention: cfg.Retention}
	if o.Backend.Clock == stores.ServerClock {
		model.Slack = 5 * time.Millisecond
	}
	res.Schedule = env.schedule
	res.visualization = &bytes.Buffer{}
	res.Checkers = Check(Evidence{Hist: env.Hist, Ledger: env.Ledger, Model: model, ProbeClient: probe.ID,
		LinTimeout: 20 * time.Second, Visualization: res.visualization})
	res.Violations = []Violation{}
	res.Verdict = Pass
	for _, c := range res.Checkers {
		res.Violations = append(res.Violations, c.Violations...)
		switch {
		case c.Verdict == Fail:
			res.Verdict = Fail
		case c.Verdict == Unknown && res.Verdict == Pass:
			res.Verdict = Unknown
		}
	}
	if ctx.Err() != nil && res.Verdict == Pass {
		res.Verdict, res.Error = Unknown, "interrupted: "+ctx.Err().Error()
	}
	if len(env.incomplete) > 0 && res.Verdict == Pass {
		res.Verdict, res.Error = Unknown, "workload incomplete: "+strings.Join(env.incomplete, "; ")
	}
	res.Seconds = time.Since(start).Seconds()
	measure(res, env)
	return res, nil
}

// tick calls f every d until stopped (never, when d is 0).
func tick(d time.Duration, f func()) (stop func()) {
	if d <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// quiet waits until every claim is past LockTTL, then probes each key once
// with its first fingerprint: a key still in flight now is stuck. A probe
// that claims releases at once (it runs no work).
func quiet(ctx context.Context, env *Env, probeID int) {
	if err := faults.Pause(ctx, env.Config.LockTTL+50*time.Millisecond); err != nil {
		return
	}
	probe(ctx, env, probeID)
}

// probe sends one Begin per key of the history, with the key's first
// fingerprint, as client probeID; a probe that claims releases at once (it
// runs no work). The liveness checker reads the answers.
func probe(ctx context.Context, env *Env, probeID int) {
	rec := &Recorder{Store: env.Store, Client: probeID, Hist: env.Hist, Clock: env.clock}
	keyed, order := byKey(env.Hist.Ops())
	for _, k := range order {
		fp := ""
		for _, op := range keyed[k] {
			if op.Input.Kind == models.Begin {
				fp = op.Input.Fingerprint
				break
			}
		}
		if fp == "" {
			continue
		}
		d, err := rec.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: fp, Now: env.clock.Now()})
		if err == nil && d.Outcome == stores.Claimed {
			_ = rec.Release(ctx, k, d.Token)
		}
	}
}

// measure fills in the counts the summary shows.
func measure(res *ScenarioResult, env *Env) {
	ops := env.Hist.Ops()
	res.Ops = len(ops)
	res.Faults = map[string]int{}
	for _, f := range env.Hist.Faults() {
		res.Faults[f.Kind]++
	}
	for k, n := range env.counted {
		res.Faults[k] += n
	}
	if len(env.findings) > 0 {
		res.Findings = map[string]int{}
		for k, n := range env.findings {
			res.Findings[k] = n
		}
	}
	res.Outcomes = map[string]int{}
	clients := map[int]bool{}
	keys := map[stores.KeyRef]bool{}
	type edge struct {
		t     int64
		delta int
	}
	edges := map[stores.KeyRef][]edge{}
	for _, op := range ops {
		clients[op.Client] = true
		if op.Input.Kind == models.Prune {
			res.Outcomes["prune"]++
			continue
		}
		keys[op.Input.Key] = true
		switch {
		case op.Output.Unknown:
			res.Outcomes["unknown"]++
		case op.Input.Kind == models.Begin:
			res.Outcomes[op.Output.Decision.Outcome.String()]++
			edges[op.Input.Key] = append(edges[op.Input.Key], edge{op.Call, 1}, edge{op.Return, -1})
		case op.Output.Fenced:
			res.Outcomes["fenced"]++
		default:
			res.Outcomes[map[models.Kind]string{models.Complete: "completed", models.Release: "released"}[op.Input.Kind]]++
		}
	}
	for _, es := range edges {
		sort.Slice(es, func(i, j int) bool {
			if es[i].t != es[j].t {
				return es[i].t < es[j].t
			}
			return es[i].delta > es[j].delta
		})
		n := 0
		for _, e := range es {
			n += e.delta
			if n > res.MaxConcurrentBegins {
				res.MaxConcurrentBegins = n
			}
		}
	}
	res.Clients, res.Keys = len(clients), len(keys)
	res.WorkRuns = len(env.Hist.Work())
	res.Charges = len(env.Ledger.Charges())
}
