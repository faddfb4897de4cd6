package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/internal/buildinfo"
	"github.com/idemcheck/idemcheck/internal/pool"
)

// Run runs the scenarios, each on a fresh store, and checks each, in the
// phases of scenario.Phase: first the shared ones, up to Parallel at once
// (each has its own store, clients, proxy and worker processes); then the
// scheduled ones, up to Parallel at once on a server-clock store while
// their episode slots fit scenario.EpisodesAtOnce, else one at a time
// (Options.scheduledSlots: every key's episode of every scheduled scenario at
// once made clients wait 15 s inside a Postgres soaked at load 30); then
// those that must run alone (they pause or restart the server the others
// use). With Options.OwnServer,
// the scenarios that fault the server run instead each on a server of its
// own, beside the shared and the scheduled phases, and the scenarios that
// run alone wait for them.
// The summary lists the results in plan order whatever order they
// finished in. An error means the run could not be set up (a store could
// not be opened); violations are in the summary, not errors. Once ctx is
// cancelled (an interrupt) nothing is an error: the summary says what
// finished and lists the rest as not run (Summary.NotRun), Interrupted.
// A run that holds half of Options.MaxMemory stops the same way, and
// says so (Summary.Stopped).
func Run(ctx context.Context, o Options) (*results.Summary, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ctx, stopGuard := guardMemory(ctx, o.MaxMemory)
	defer stopGuard()
	names := o.Plan()
	sum := o.summary(time.Now())
	o.journalRunStart(sum, names)
	runID := NewRunID()
	caps := o.Caps()
	slots := make([]slot, len(names))
	reps := map[string]int{}
	phases := make([][]int, scenario.Alone+1)
	for i, name := range names {
		sc, _ := scenario.Lookup(name)
		slots[i] = slot{sc: sc, rep: reps[name]}
		reps[name]++
		ph := sc.Phase(caps)
		if sc.WhyNot(caps) != "" {
			ph = scenario.Shared // skipped at once
		}
		phases[ph] = append(phases[ph], i)
	}
	// The longest start first, so that the last to finish is not a long
	// one started late (a scenario's estimated cost).
	for _, ph := range phases[:scenario.Alone] {
		sort.SliceStable(ph, func(a, b int) bool { return slots[ph[a]].cost(o) > slots[ph[b]].cost(o) })
	}
	// The scenarios that fault the server move each to a server of its
	// own, when the run can start one: there they run beside the shared
	// phase (they pause the server, not the machine).
	var own, rest []int
	for _, i := range phases[scenario.Alone] {
		if o.onOwnServer(slots[i].sc, caps) {
			own = append(own, i)
		} else {
			rest = append(rest, i)
		}
	}
	phases[scenario.Alone] = rest
	pr := &progressOf{o: o, total: len(names), started: sum.Started}
	runOne := func(o Options, i int, onOwn bool) error {
		caps := o.Caps()
		sl := &slots[i]
		if ctx.Err() != nil {
			return nil // not run
		}
		sl.ran = true
		report := pr.reporter(sl.sc.Name)
		if why := sl.sc.WhyNot(caps); why != "" {
			sl.res = skippedResult(sl.sc, sl.rep, why)
			o.journalResult(sl.res)
			report(Progress{Skipped: why, Done: true})
			return nil
		}
		res, err := RunScenario(ctx, o, sl.sc, runID, i, sl.rep, report)
		if err != nil && ctx.Err() != nil {
			// Interrupted while it was set up (a server coming back, a
			// store opening): it never ran, and the run reports the rest.
			sl.ran = false
			return nil
		}
		if err != nil {
			// Its store or server could not be set up (a store that
			// timed out connecting, a server that did not come back):
			// this scenario is undecided, the error said, and the run
			// goes on and reports. The run was thrown away, exit 2,
			// with the scenarios that had passed and nothing written.
			res, sl.setupErr = setupFailed(sl.sc, sl.rep, err), err
			o.journalResult(res)
		}
		res.OwnServer = onOwn
		sl.res = res
		// A scenario that skipped once it ran (a store that renews no
		// lease, met by heartbeat) says so: its log line read "done".
		report(Progress{Ops: res.Ops, Faults: sumFaults(res.Faults), Violations: len(res.Violations), Skipped: res.Skipped, Done: true})
		return nil
	}
	// ownDone gives the error of the server-fault scenarios once they
	// have all finished, each on a server of its own, up to Parallel at
	// once; one whose server cannot start goes back to the Alone phase.
	ownDone := make(chan error, 1)
	go func() {
		var mu sync.Mutex
		var back []int
		err := pool.Each(len(own), max(o.Parallel, 1), func(j int) error {
			srv, err := o.OwnServer(ctx)
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				sum.OwnServerError = err.Error()
				back = append(back, own[j])
				return nil
			}
			defer srv.Close()
			oo := o
			oo.Addr, oo.Net, oo.Server, oo.NoServer = srv.Addr, srv.Net, srv.Server, ""
			return runOne(oo, own[j], true)
		})
		slices.Sort(back)
		phases[scenario.Alone] = append(back, phases[scenario.Alone]...)
		ownDone <- err
	}()
	budget := newSlotBudget(scenario.EpisodesAtOnce)
	for ph := range phases {
		n := max(o.Parallel, 1)
		if scenario.Phase(ph) == scenario.Alone {
			n = 1
		}
		run := func(i int) error { return runOne(o, i, false) }
		if scenario.Phase(ph) == scenario.Scheduled {
			run = func(i int) error {
				w := o.scheduledSlots(slots[i].sc)
				if !budget.take(ctx, w) {
					return nil // interrupted: not run
				}
				defer budget.give(w)
				return runOne(o, i, false)
			}
		}
		if scenario.Phase(ph) == scenario.Alone {
			// The lane ends before the scenarios that run alone, which
			// fault the server (those whose own server could not start
			// among them). The scheduled phase runs beside it: on
			// servers of their own, the lane's faults never reach the
			// scheduled scenarios' store.
			if err := <-ownDone; err != nil {
				return nil, err
			}
		}
		idx := phases[ph]
		if err := pool.Each(len(idx), n, func(j int) error { return run(idx[j]) }); err != nil {
			if scenario.Phase(ph) != scenario.Alone {
				<-ownDone // the lane's scenarios hold servers and the summary
			}
			return nil, err
		}
	}
	if err := noneSetUp(slots); err != nil && ctx.Err() == nil {
		return nil, err
	}
	for i, sl := range slots {
		if !sl.ran {
			sum.NotRun = append(sum.NotRun, results.ID{Scenario: names[i], Repetition: sl.rep}.String())
			continue
		}
		sum.Scenarios = append(sum.Scenarios, *sl.res)
		sum.Violations = append(sum.Violations, sl.res.Violations...)
	}
	sum.Ended = time.Now()
	sum.Seconds = sum.Ended.Sub(sum.Started).Seconds()
	if ctx.Err() != nil {
		sum.Interrupted = true
		var mem *MemoryLimitError
		if errors.As(context.Cause(ctx), &mem) {
			sum.Stopped = mem.Error()
		}
	}
	sum.Verdict = runVerdict(sum.Scenarios, sum.Interrupted)
	return sum, nil
}

// summary is the summary of a run of o started at started, before any
// scenario ran. It names the build that made it from the start, so that
// a run recovered from its journal says which build made it.
func (o Options) summary(started time.Time) *results.Summary {
	b := buildinfo.Get()
	return &results.Summary{Store: o.Backend.Name, Variant: o.Variant, Seed: o.Seed, Clients: o.Clients, Keys: o.Keys,
		LockTTL: results.Duration(o.LockTTL), Retention: results.Duration(o.Retention), Started: started, Violations: []check.Violation{},
		Version: b.Version, GoVersion: b.GoVersion, Commit: b.Revision()}
}

// planIDs names each scenario run of a plan as its results do
// (results.ID: "race", then "race.2" with --count 2): a cut run's list of
// what never ran said "race" three times.
func planIDs(plan []string) []string {
	reps := map[string]int{}
	out := make([]string, len(plan))
	for i, name := range plan {
		out[i] = results.ID{Scenario: name, Repetition: reps[name]}.String()
		reps[name]++
	}
	return out
}

// Unstarted is the summary of a run of o interrupted before any scenario
// started (while its servers were starting): undecided, every scenario of
// the plan not run.
func (o Options) Unstarted(started time.Time) *results.Summary {
	sum := o.summary(started)
	sum.Ended, sum.Interrupted, sum.NotRun, sum.Verdict = time.Now(), true, planIDs(o.Plan()), check.Unknown
	sum.Seconds = sum.Ended.Sub(started).Seconds()
	return sum
}

// slot is one scenario run of a plan: what runs, and what it gave.
type slot struct {
	sc  scenario.Scenario
	rep int
	ran bool // started (or skipped); false: the run was interrupted first
	res *results.ScenarioResult
	// setupErr is why its store or server could not be set up (res is
	// then undecided, saying it).
	setupErr error
}

func (s slot) cost(o Options) time.Duration { return o.ScenarioCost(s.sc) }

// noneSetUp is the first setup error of a run in which no scenario could
// be set up (each that was not skipped failed to open its store or
// start its server): a setup error, as a store that never opens is
// (exit 2), with nothing recorded to keep. nil when one was set up.
func noneSetUp(slots []slot) error {
	var first error
	for _, sl := range slots {
		switch {
		case sl.setupErr != nil:
			first = cmp.Or(first, sl.setupErr)
		case sl.res != nil && sl.res.Verdict != check.Skipped:
			return nil
		}
	}
	return first
}

// progressOf turns the reports of scenarios that may run at once into one
// stream of Progress: Index counts the scenarios finished (plus the one
// reporting, until it is done), Violations the violations found so far.
type progressOf struct {
	o       Options
	total   int
	started time.Time

	mu         sync.Mutex
	done       int
	violations int
}

func (p *progressOf) reporter(name string) func(Progress) {
	if p.o.Progress == nil {
		return func(Progress) {}
	}
	return func(r Progress) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.Done {
			p.done++
			p.violations += r.Violations
			r.Index, r.Violations = p.done, p.violations
		} else {
			r.Index, r.Violations = min(p.done+1, p.total), p.violations
		}
		r.Scenario, r.Total, r.Elapsed = name, p.total, time.Since(p.started)
		p.o.Progress(r)
	}
}

func sumFaults(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// overall is a run's verdict from its scenario runs': a failure fails it;
// else one undecided leaves it undecided; else it passes if a scenario
// ran and passed. A run whose every scenario was skipped (or that had
// none) judged nothing: check.Skipped, never a pass (the CLI exits 3).
// runVerdict is a run's verdict from its scenarios' ([overall]): a run
// cut short (interrupted, stopped, its process dead) is no pass, and
// nothing judged in it is not "skipped" but undecided; what it proved
// failed stands. A run, its recovery and its recheck all judge so.
func runVerdict(rs []results.ScenarioResult, interrupted bool) check.Verdict {
	v := overall(rs)
	if interrupted && v != check.Fail {
		return check.Unknown
	}
	return v
}

func overall(rs []results.ScenarioResult) check.Verdict {
	v := check.Skipped
	for _, r := range rs {
		switch r.Verdict {
		case check.Fail:
			return check.Fail
		case check.Unknown:
			v = check.Unknown
		case check.Pass:
			if v == check.Skipped {
				v = check.Pass
			}
		}
	}
	return v
}

var runSeq atomic.Int64

// NewRunID names a run's stores (SQLite files, Postgres schemas, Redis
// prefixes) apart from every other run's: the clock, and a sequence for
// runs started in the same microsecond by one process.
func NewRunID() int64 {
	return (time.Now().UnixNano()/1000)%1_000_000_000 + runSeq.Add(1)*1_000_000_000
}

// Namespace is the namespace of one store of a run: the Postgres schema
// or Redis key prefix that isolates it (stores.Config.Namespace). space
// names the store within the run (a scenario and its place in the run).
// Worker processes open the same one.
func Namespace(runID int64, space string) string {
	return fmt.Sprintf("idem_%d_%s", runID, strings.ReplaceAll(space, "-", "_"))
}
