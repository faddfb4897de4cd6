package harness

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/internal/clip"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Open opens a fresh store of the run's backend, named space within the
// run: its own SQLite file, Postgres schema or Redis key prefix
// (cfg.Namespace is set here). It returns the store, its configuration
// and the address it lives at.
func (o Options) Open(ctx context.Context, space string, runID int64, cfg stores.Config) (stores.Store, stores.Config, string, error) {
	cfg.Namespace = Namespace(runID, space)
	addr := o.StoreAddr(space, runID)
	var st stores.Store
	var err error
	if o.OpenStore != nil {
		st, err = o.OpenStore(ctx, space, cfg)
	} else {
		st, err = o.Backend.Open(ctx, addr, cfg)
	}
	return st, cfg, addr, err
}

// StoreAddr is where the store named space lives: its own SQLite file, or
// the server's address. Worker processes open the same.
func (o Options) StoreAddr(space string, runID int64) string {
	if o.Backend.Lives == stores.File {
		return filepath.Join(o.Addr, fmt.Sprintf("%d-%s.db", runID, space))
	}
	return o.Addr
}

// StoreConfig is the configuration a scenario's store opens with.
func (o Options) StoreConfig(sc scenario.Scenario) stores.Config {
	cfg := stores.Config{LockTTL: o.LockTTL, Retention: o.Retention, Variant: workload.StoreVariant(o.Variant), Edit: o.Edit}
	if sc.Retention > 0 && !o.RetentionFixed {
		cfg.Retention = sc.Retention
	}
	cfg.LockTTL = o.LockTTLFor(sc)
	return cfg
}

// NewEnv opens a fresh store for the scenario, named space within the run,
// and makes its Env; randSeed seeds the Env's PRNG. Close the Env's store
// when done.
func (o Options) NewEnv(ctx context.Context, sc scenario.Scenario, space string, runID, randSeed int64) (*scenario.Env, error) {
	if o.Server != nil {
		// A server an earlier scenario restarted may still be coming up
		// on a loaded machine: every scenario starts on a server that
		// answers, with no fault left on.
		if err := o.Server.Heal(ctx); err != nil {
			return nil, fmt.Errorf("%s server before %s: %w", o.Server.Kind(), sc.Name, err)
		}
	}
	st, cfg, addr, err := o.Open(ctx, space, runID, o.StoreConfig(sc))
	if err != nil {
		return nil, fmt.Errorf("open %s store: %w", o.Backend.Name, err)
	}
	return scenario.NewEnv(scenario.Setup{Caps: o.Caps(), Name: sc.Name, Store: st, Config: cfg, Addr: addr, Variant: o.Variant,
		Clients: o.Clients, Keys: o.Keys, Seed: o.Seed, RandSeed: randSeed, ProbeWait: o.ProbeWait}), nil
}

// LinTimeout is porcupine's budget per scenario: past it, linearizability
// is undecided (never a pass). It guards against a history whose search
// blows up, not against a long one: a Redis chaos history of 5,797 calls on
// 788 keys, each key a few calls beside 120 to 140 Prunes and six unknown
// outcomes, took 29 CPU-seconds at about 37 ms a key, and 20 s left it
// undecided on a loaded machine.
const LinTimeout = 60 * time.Second

// ScenarioSeed seeds the PRNG of one run of a scenario: a function of the
// run's seed, the scenario's name and its repetition only, so a scenario
// failing inside `--scenario all` fails the same way alone with the same
// seed.
func ScenarioSeed(seed int64, name string, rep int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", seed, name, rep)
	return int64(h.Sum64() >> 1)
}

// RunScenario runs one scenario (its rounds) on a fresh store, probes its
// keys, and checks its history. index is its place in the run (it names
// its store) and rep its repetition (it seeds its PRNG, with the seed).
func RunScenario(ctx context.Context, o Options, sc scenario.Scenario, runID int64, index, rep int, report func(Progress)) (*results.ScenarioResult, error) {
	env, err := o.NewEnv(ctx, sc, fmt.Sprintf("%s_%d", sc.Name, index), runID, ScenarioSeed(o.Seed, sc.Name, rep))
	if err != nil {
		return nil, err
	}
	defer env.Store.Close()
	res := &results.ScenarioResult{Name: sc.Name, Doc: sc.Doc, Repetition: rep}
	id := res.ID().String()
	if o.Journal != nil {
		env.Hist.JournalTo(o.Journal, id)
		env.Ledger.JournalTo(o.Journal, id)
		o.Journal.Note(id, noteStart, journalStart{Started: env.Hist.Started(), Doc: sc.Doc, Repetition: rep,
			Retention: results.Duration(env.Config.Retention), LockTTL: results.Duration(env.Config.LockTTL), Params: o.params(env, -1)})
	}
	if o.SpillDir != "" {
		if err := env.Hist.SpillTo(filepath.Join(o.SpillDir, id), cmp.Or(o.SpillAfter, DefaultSpillAfter)); err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
	}
	start := time.Now()
	report(Progress{})
	var checking atomic.Bool
	stopTicker := scenario.Every(context.Background(), o.ProgressEvery, func() {
		report(Progress{Ops: env.Hist.OpCount(), Faults: env.Hist.FaultCount(), Checking: checking.Load()})
	})
	defer stopTicker()
	stopWatch := history.WatchStalls(env.Hist)
	rounds := 0
	for {
		env.SetRound(rounds)
		sc.Run(ctx, env)
		rounds++
		if o.Duration <= 0 || time.Since(start) >= o.Duration || ctx.Err() != nil {
			break
		}
	}
	res.Rounds = rounds
	checking.Store(true)
	j := o.Finish(ctx, env, stopWatch, true, true)
	res.Attach(env.Hist, env.Ledger)
	if j.Verdict == check.Skipped {
		sk := skippedResult(sc, rep, j.Record.Skipped)
		o.journalResult(sk)
		return sk, nil
	}
	res.Retention, res.LockTTL = results.Duration(env.Config.Retention), results.Duration(env.Config.LockTTL)
	res.Schedule, res.Episodes = j.Record.Schedule, j.Record.Episodes
	for _, n := range append([]string{scenario.BetweenCallsOnly(j.Record.Episodes), scenario.UnannouncedWaits(j.Record.Episodes, o.Backend.WaitsAnnounced),
		scenario.ClockOutran(j.Record.Episodes, env.Config.LockTTL)}, slices.Concat(j.Record.NotTested, j.Notes)...) {
		// Said once: a --duration run's rounds each said the same note
		// (six times, word for word, of chaos's untested faults).
		if n != "" && !slices.Contains(res.Notes, n) {
			res.Notes = append(res.Notes, n)
		}
	}
	res.Check = &j.Params
	res.Checkers, res.Violations, res.Verdict, res.Interrupted = j.Checkers, j.Violations, j.Verdict, j.Interrupted
	res.Error = j.Why
	if ctx.Err() != nil && res.Verdict == check.Pass {
		res.Verdict, res.Error = check.Unknown, "interrupted: "+ctx.Err().Error()
	}
	// Why the workload could not finish is said whatever the verdict: an
	// undecided checker (no probe ran) must not hide the reason.
	if inc := j.Record.Incomplete; len(inc) > 0 {
		if res.Verdict == check.Pass {
			res.Verdict = check.Unknown
		}
		msg := "workload incomplete: " + firstOf(inc, incompleteShown)
		if res.Error != "" {
			msg = res.Error + "; " + msg
		}
		res.Error = msg
	}
	res.Seconds = time.Since(start).Seconds()
	measure(res, env.Hist, env.Ledger, j.Record)
	o.journalResult(res)
	return res, nil
}

// skippedResult is the result of a scenario that did not run, and why.
func skippedResult(sc scenario.Scenario, rep int, why string) *results.ScenarioResult {
	return &results.ScenarioResult{Name: sc.Name, Doc: sc.Doc, Repetition: rep, Verdict: check.Skipped, Skipped: why,
		Faults: map[string]int{}, Outcomes: map[string]int{}, Checkers: []check.Result{}, Violations: []check.Violation{}}
}

// SetupFailed begins the error of a scenario that could not be set up
// (RunScenario's error: its store did not open, its server did not come
// back), which is undecided: idemtest reads it to hint at the cause.
const SetupFailed = "could not be set up: "

// setupFailed is the result of a scenario that could not be set up:
// undecided, with the error (SetupFailed).
func setupFailed(sc scenario.Scenario, rep int, err error) *results.ScenarioResult {
	r := skippedResult(sc, rep, "")
	r.Verdict, r.Error = check.Unknown, SetupFailed+err.Error()
	return r
}

// measure fills in the counts the summary shows, part by part
// (history.History.EachPart): a spilled history is never held whole. It
// also notes the deaths of the store's processes on their own
// (deathNote), and leaves undecided a pass whose calls they cut in more
// than deathsUndecide's share: a run, its recovery and a recheck judge
// it alike.
func measure(res *results.ScenarioResult, hist *history.History, ledger *history.Ledger, rec scenario.Record) {
	res.Faults = map[string]int{}
	for _, f := range hist.Faults() {
		res.Faults[string(f.Kind)]++
	}
	for k, n := range rec.Counted {
		res.Faults[k] += n
	}
	res.Findings = rec.Findings
	res.Outcomes = map[string]int{}
	res.Ops, res.MaxConcurrentBegins, res.FirstUnknown = 0, 0, ""
	clients := map[int]bool{}
	keys, died, unanswered := 0, 0, 0
	var firstUnanswered, firstRefused string
	refused := 0 // declared not applied by the store itself
	diedText, unansweredText := stores.ErrProcessDied.Error(), stores.ErrUnanswered.Error()
	first := true
	type edge struct {
		t     int64
		delta int
	}
	err := hist.EachPart(func(p *history.History) error {
		edges := map[stores.KeyRef][]edge{}
		for _, op := range p.Ops() {
			if op.Input.Kind == models.Prune {
				if first { // every part holds every Prune
					res.Ops++
					clients[op.Client] = true
					res.Outcomes["prune"]++
				}
				continue
			}
			res.Ops++
			clients[op.Client] = true
			if _, ok := edges[op.Input.Key]; !ok {
				edges[op.Input.Key] = nil
				keys++
			}
			if op.Lost {
				// An answer a fault injector in front of the store lost
				// (scripts/lossy-exec.py): a fault, which the faults
				// column showed as none.
				res.Faults["lost-answer"]++
			}
			switch {
			case op.Output.Unknown:
				res.Outcomes["unknown"]++
				if res.FirstUnknown == "" && op.Err != "" && !op.Lost && !op.Deadline {
					res.FirstUnknown = op.Err
				}
				if strings.Contains(op.Err, diedText) {
					if died++; died == 1 && rec.FirstDeath == "" {
						rec.FirstDeath = op.Err
					}
				}
				if strings.Contains(op.Err, unansweredText) {
					if unanswered++; unanswered == 1 {
						firstUnanswered = op.Err
					}
				}
			case op.Output.NotApplied:
				res.Outcomes["not-applied"]++
				if !op.Lost && !op.Deadline {
					if refused++; refused == 1 {
						firstRefused = op.Err
					}
				}
			case op.Input.Kind == models.Begin:
				res.Outcomes[op.Output.Decision.Outcome.String()]++
				edges[op.Input.Key] = append(edges[op.Input.Key], edge{op.Call, 1}, edge{op.Return, -1})
			case op.Output.Fenced:
				res.Outcomes["fenced"]++
			default:
				res.Outcomes[map[models.Kind]string{models.Complete: "completed", models.Release: "released"}[op.Input.Kind]]++
			}
		}
		first = false
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
		return nil
	})
	if err != nil && res.Error == "" {
		res.Error = "counting the history: " + err.Error()
	}
	res.Clients, res.Keys = len(clients), keys
	if n := deathNote(rec.Deaths, died, rec.FirstDeath); n != "" {
		res.Notes = append(res.Notes, n)
	}
	if res.Verdict == check.Pass && died > 0 && died*deathsUndecide > res.Ops {
		// A store that died on one kind of request (the scheduled
		// scenarios' traced calls) passed them, its calls nearly all cut.
		res.Verdict = check.Unknown
		res.Error = strings.TrimPrefix(res.Error+"; "+fmt.Sprintf("the store's process died on its own, cutting %d of %d calls (more than one in %d), judged as of unknown outcome: too few answers to judge it by; its stderr or the first cut call says why (%s)",
			died, res.Ops, deathsUndecide, clip.Bytes(rec.FirstDeath, 300)), "; ")
	}
	if refused > 0 {
		// Judged as no-ops, rightly; but a pass said nothing of what the
		// store owed them: a Python SQLite store refused 134 of 505 calls
		// (its write lock held across a failpoint) under a PASS that
		// named none of them.
		res.Notes = append(res.Notes, fmt.Sprintf("the store refused %d of %d calls as not applied (first: %s): they changed nothing and are judged so, but what the store owed them (a claim, a replay, a 409) was not seen",
			refused, res.Ops, clip.Bytes(firstRefused, 200)))
	}
	if unanswered > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the store never answered %d call(s) (first: %s): they were cut and judged as of unknown outcome; a correct store answers every request",
			unanswered, clip.Bytes(firstUnanswered, 300)))
	}
	res.WorkRuns = len(hist.Work())
	res.Charges = len(ledger.Charges())
}

// deathsUndecide: a pass whose calls the store's deaths on its own cut in
// more than one in deathsUndecide is left undecided (measure), as
// idemtest's model test leaves a store whose calls fail so in more than
// a tenth of its cases.
const deathsUndecide = 10

// incompleteShown is how many reasons a workload could not finish are
// written out in a result; the rest are counted. A drawn run of 5,364 keys
// wrote 700 KB of them into one line.
const incompleteShown = 5

// firstOf joins the first n of l, and says how many more there are.
func firstOf(l []string, n int) string {
	if len(l) <= n {
		return strings.Join(l, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(l[:n], "; "), len(l)-n)
}

// deathNote says that the store's processes died on their own, not at a
// crash the harness injected: deaths times in this process (rec.Deaths;
// none known for a run recovered or rechecked from its files), with
// calls calls in flight, the ones whose error wraps stores.ErrProcessDied
// (a worker process's too). The cut calls are judged as unknown outcomes
// and the store was started again, so a run passes through such deaths,
// but a correct store's process does not die: a pass had said nothing of
// it. "" when none died.
func deathNote(deaths, calls int, first string) string {
	if deaths == 0 && calls == 0 {
		return ""
	}
	what := "the store's process died on its own"
	if deaths > 0 {
		what += fmt.Sprintf(" %d time(s)", deaths)
	}
	return fmt.Sprintf("%s, with %d call(s) in flight, not at a crash idemcheck injected (first: %s): it was started again, and the calls a death cut were judged as of unknown outcome; a correct store's process does not die",
		what, calls, clip.Bytes(first, 300))
}
