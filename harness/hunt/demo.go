package hunt

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/sched"
	"github.com/idemcheck/idemcheck/stores"
)

// A demo replays one store-side mutant's minimal interleaving on the real
// store, under the controlled scheduler with a Script, and then the same
// schedule on the correct store. Steps that exist only because the mutant
// splits one statement in two (its extra read) are left out there: the
// correct store has no such statement.

// demoStep is one step of a demo's schedule.
type demoStep struct {
	client     string   // "A", "B", "C", or "P" (the pruner)
	until      []string // run the client until it waits at one of these
	toEnd      bool     // run it until it returns
	tick       bool     // move the clock past LockTTL instead
	mutantOnly bool     // the mutant's extra statement: not on the correct store
}

// demoSpec is one mutant's demo.
type demoSpec struct {
	story   string // what the schedule does, in a line
	keyed   bool   // the provider is keyed by the order (charge:<orderId>)
	clients []scenario.SchedClient
	pruner  bool
	steps   []demoStep
}

var (
	untilClaimed = []string{faults.RunAfterClaim, faults.RunBeforeBegin} // claimed, or told to retry
	untilRead    = []string{faults.BeginAfterSelect}
	untilWorked  = []string{faults.RunAfterWork, faults.RunBeforeBegin}
	untilSaved   = []string{faults.RunAfterComplete, faults.RunBeforeBegin}
	untilNextTry = []string{faults.RunBeforeBegin}
	untilClaim   = []string{faults.RunAfterClaim}
)

var demoSpecs = map[string]demoSpec{
	"select-then-insert": {
		story:   "A and B send the same order at once; each reads the key, then inserts",
		clients: []scenario.SchedClient{{Name: "A"}, {Name: "B"}},
		steps: []demoStep{
			{client: "A", until: untilRead, mutantOnly: true},
			{client: "B", until: untilRead, mutantOnly: true},
			{client: "A", until: untilClaimed},
			{client: "B", until: untilClaimed},
			{client: "A", until: untilWorked},
			{client: "B", until: untilWorked},
		}},
	"unfenced-complete": {
		story:   "A claims and stalls past LockTTL; B takes over, charges and saves; A's provider call then fails and A saves the error; C retries the order",
		clients: []scenario.SchedClient{{Name: "A", FailFirst: true, SaveError: true}, {Name: "B"}, {Name: "C"}},
		steps: []demoStep{
			{client: "A", until: untilClaim},
			{tick: true},
			{client: "B", until: untilSaved},
			{client: "A", until: untilSaved},
			{client: "C", toEnd: true},
		}},
	"unfenced-release": {
		story:   "A claims and stalls past LockTTL; B takes over, charges and saves; A's provider call fails and A releases its claim; C retries the order",
		clients: []scenario.SchedClient{{Name: "A", FailFirst: true}, {Name: "B"}, {Name: "C"}},
		steps: []demoStep{
			{client: "A", until: untilClaim},
			{tick: true},
			{client: "B", until: untilSaved},
			{client: "A", until: untilNextTry},
			{client: "C", toEnd: true},
		}},
	"no-fingerprint": {
		story:   "A pays 1000 cents; B reuses A's key for the same amount in EUR",
		clients: []scenario.SchedClient{{Name: "A"}, {Name: "B", Variant: "&currency=eur"}},
		steps:   []demoStep{{client: "A", toEnd: true}, {client: "B", toEnd: true}},
	},
	"blind-takeover": {
		story:   "A claims and crashes; past LockTTL, B and C both read the stale claim, then both take it over",
		clients: []scenario.SchedClient{{Name: "A", CrashAt: faults.RunAfterClaim}, {Name: "B"}, {Name: "C"}},
		steps: []demoStep{
			{client: "A", toEnd: true},
			{tick: true},
			{client: "B", until: untilRead, mutantOnly: true},
			{client: "C", until: untilRead, mutantOnly: true},
			{client: "B", until: untilClaimed},
			{client: "C", until: untilClaimed},
			{client: "B", until: untilWorked},
			{client: "C", until: untilWorked},
		}},
	"token-reuse": {
		story: "A claims (token t) and stalls past LockTTL; B takes over, its provider call fails and it releases; C claims afresh (on a caller clock, C's clock lags by LockTTL) and gets t again; A's provider call fails and A saves the error with t",
		clients: []scenario.SchedClient{{Name: "A", FailFirst: true, SaveError: true}, {Name: "B", FailFirst: true},
			{Name: "C", Lag: true}},
		steps: []demoStep{
			{client: "A", until: untilClaim},
			{tick: true},
			{client: "B", until: untilNextTry},
			{client: "C", until: untilClaimed},
			{client: "A", until: untilSaved},
			{client: "C", toEnd: true},
		}},
	"no-takeover": {
		story:   "A claims and crashes; past LockTTL, B retries the order",
		clients: []scenario.SchedClient{{Name: "A", CrashAt: faults.RunAfterClaim}, {Name: "B", Attempts: 3}},
		steps:   []demoStep{{client: "A", toEnd: true}, {tick: true}, {client: "B", toEnd: true}},
	},
	"short-retention": {
		story:   "A completes the order; the clock passes LockTTL (far inside the retention); the pruner runs; B retries the order",
		clients: []scenario.SchedClient{{Name: "A"}, {Name: "B"}},
		pruner:  true,
		steps:   []demoStep{{client: "A", toEnd: true}, {tick: true}, {client: "P", toEnd: true}, {client: "B", toEnd: true}},
	},
	"stale-overwrite": {
		story:   "A claims, charges and stalls past LockTTL; B reads A's claim as stale; A saves its answer; B writes its takeover",
		clients: []scenario.SchedClient{{Name: "A"}, {Name: "B"}},
		steps: []demoStep{
			{client: "A", until: untilWorked},
			{tick: true},
			{client: "B", until: untilRead, mutantOnly: true},
			{client: "A", until: untilSaved},
			{client: "B", toEnd: true},
		}},
}

// ScriptedDemos lists the mutants with a scripted interleaving, sorted;
// every other mutant's demo is found by a hunt (see foundDemo).
func ScriptedDemos() []string {
	var out []string
	for m := range demoSpecs {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// DemoLine is one line of a demo run: a statement a client ran and what it
// returned, the clock moving, a client blocked or crashed.
type DemoLine struct {
	Client string `json:"client,omitempty"`
	Text   string `json:"text"`
	Result string `json:"result,omitempty"`
	// Row is the key's stored row once the step ran ("" unread; the store
	// cannot show it).
	Row string `json:"row,omitempty"`
	// Switch, on a client's first line after the scheduler let it run,
	// says where the scheduler switched: the failpoint the client ran from
	// and where the client that ran before it waits.
	Switch string `json:"switch,omitempty"`
}

// DemoRun is one store's run of a demo's schedule.
type DemoRun struct {
	Variant string     `json:"variant"`
	Lines   []DemoLine `json:"lines"`
	// Answers: what each client finally got.
	Answers []string `json:"answers"`
	// Charges counts the provider's effective charges of the order;
	// ChargeIDs says which, and by whom.
	Charges   int      `json:"charges"`
	ChargeIDs []string `json:"charge_ids"`
	// Trace is the key's history (calls, answers, work and charges) in a
	// demo found by a hunt; a scripted demo's Lines say it all.
	Trace []string `json:"trace,omitempty"`
	// Harm says, in a line, what went wrong (or that nothing did).
	Harm string `json:"harm"`
	// Caught lists the checkers that failed on the run's history.
	Caught []string `json:"caught"`
	// NotJudged says why the run was not judged whole (its workload could
	// not finish: a topology that did not come back after a failover),
	// empty when it was. A correct store's run that was not judged shows
	// nothing, however its checkers ended.
	NotJudged string `json:"not_judged,omitempty"`
	// Outran, on a server-clock store, says that the machine let more
	// real time than LockTTL pass between the script's clock ticks: a
	// claim may have gone stale by the server's clock, not by the
	// script ("": it did not).
	Outran string `json:"outran,omitempty"`
}

// DemoInfo describes a demo.
type DemoInfo struct {
	Mutant string `json:"mutant"`
	Store  string `json:"store"`
	Story  string `json:"story"`
	Keyed  bool   `json:"keyed"`
	// Side is where the bug lives: "store", "client" or "config";
	// Scenario the scenario meant to kill it.
	Side     string `json:"side"`
	Scenario string `json:"scenario"`
	// Found: no scripted interleaving; a hunt with Scenario found the
	// episode shown (shrunk), and it ran again on the correct store.
	Found bool `json:"found"`
	// LockTTL the stores ran with.
	LockTTL string `json:"lock_ttl"`
	// Unscripted, when set, says why a mutant with a scripted
	// interleaving was hunted instead (Found): the script showed no harm
	// on this store's version of the bug.
	Unscripted string `json:"unscripted,omitempty"`
	// CorrectRerun, when set, says why the correct store's run was run
	// again at a longer LockTTL (see Demo): its first run was spoiled by
	// a machine slower than the lease.
	CorrectRerun string `json:"correct_rerun,omitempty"`
}

// Spoiled reports whether a correct store's demo run went wrong: a
// checker caught it, or the order was charged more than once. The demo
// then shows nothing about the mutant (see [Demo]).
func (r *DemoRun) Spoiled() bool { return r != nil && (len(r.Caught) > 0 || r.Charges > 1) }

// rerunFactor is how much longer the LockTTL of a correct store's demo
// run is when it runs again after a spoiled run on a server-clock store.
const rerunFactor = 10

// Demo runs the mutant's minimal interleaving on o.Backend, then the same
// schedule on the correct store: the scripted one (ScriptedDemos), or the
// one a hunt finds (every other mutant of MutantsFor(o.Backend)).
func Demo(ctx context.Context, o harness.Options, mutant string) (*DemoInfo, *DemoRun, *DemoRun, error) {
	if known := MutantsFor(o.Backend); !slices.Contains(known, mutant) {
		return nil, nil, nil, fmt.Errorf("store %s has no mutant %q (its mutants: %s)", o.Backend.Name, mutant, strings.Join(known, ", "))
	}
	spec, ok := demoSpecs[mutant]
	if !ok {
		return foundDemo(ctx, o, mutant)
	}
	given := o
	// A demo is a scheduled episode: its LockTTL is the scheduled
	// scenarios' (harness.Options.LockTTLFor).
	o = OptionsFor(o)
	name, side, _ := MutantScenario(mutant)
	info := &DemoInfo{Mutant: mutant, Store: o.Backend.Name, Story: spec.story, Keyed: spec.keyed, LockTTL: o.LockTTLFor(demoScenario).String(),
		Side: side, Scenario: name}
	bad, err := runDemo(ctx, o, spec, mutant)
	if err != nil {
		return info, nil, nil, err
	}
	if len(bad.Caught) == 0 && bad.Charges <= 1 && ctx.Err() == nil {
		// The script shows the built-in mutant's bug; a store's own
		// variant of the same name may be another version of it (an
		// exec store's unfenced release that still checks the status
		// deleted nothing after the new owner's save), which the script
		// does not reach: hunted, where the demo said "no harm" of a
		// bug that check fails.
		finfo, fbad, fgood, ferr := foundDemo(ctx, given, mutant)
		if finfo != nil {
			finfo.Unscripted = fmt.Sprintf("the scripted interleaving showed no harm on %s's %s (%s), so scenario %s hunted it", o.Backend.Name, mutant, strings.TrimSuffix(bad.Harm, "."), finfo.Scenario)
		}
		return finfo, fbad, fgood, ferr
	}
	good, err := runDemo(ctx, o, spec, stores.Correct)
	if err == nil && ctx.Err() == nil && good.Spoiled() && o.Backend.Clock == stores.ServerClock {
		// A server-clock store judges a lease by real time: on a machine
		// slower than the lease (a loaded CI runner), a client parked by
		// the script past LockTTL loses its claim, and the next client
		// takes it over and charges again: the lease working, not a bug
		// of the store. The correct run is run again at a longer LockTTL
		// (each tick of the script waits it out), and the demo says so.
		// Its Retention grows as much: a tick is meant to pass far inside
		// the retention (short-retention's story), and at ten times a
		// LockTTL of 2 s a tick outlasted the default 10 s, the pruner
		// rightly deleted the record, and the rerun charged again.
		ttl := o.LockTTLFor(demoScenario)
		longer := o
		longer.ScheduledLockTTL = ttl * rerunFactor
		longer.LockTTL = max(longer.LockTTL, longer.ScheduledLockTTL)
		longer.Retention = o.Retention * rerunFactor
		info.CorrectRerun = fmt.Sprintf("the correct store's first run, at LockTTL %s, was spoiled (%s): a store that judges leases by its own clock "+
			"lets a parked owner's claim go stale when the machine is slower than the lease; it ran again at LockTTL %s (Retention %s)",
			ttl, strings.TrimSuffix(good.Harm, "."), longer.LockTTLFor(demoScenario), longer.Retention)
		good, err = runDemo(ctx, longer, spec, stores.Correct)
	}
	return info, bad, good, err
}

// demoScenario is the scenario a demo's store is opened for (its name
// names the store's file, schema or prefix).
var demoScenario = scenario.Scenario{Name: "demo", Scheduled: true}

// runDemo runs the schedule on one variant of the store.
func runDemo(ctx context.Context, o harness.Options, spec demoSpec, variant string) (*DemoRun, error) {
	o.Variant, o.Clients, o.Keys = variant, len(spec.clients), 1
	env, err := o.NewEnv(ctx, demoScenario, "demo", harness.NewRunID(), o.Seed)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, variant)
	}
	defer env.Store.Close()
	env.Fresh("demo")
	env.UseSchedClock()

	var steps []sched.Step
	ticks := 0
	for _, st := range spec.steps {
		switch {
		case st.mutantOnly && variant == stores.Correct:
		case st.tick:
			steps = append(steps, sched.Step{Action: scenario.Tick})
			ticks++
		default:
			steps = append(steps, sched.Step{Client: st.client, Until: st.until, ToEnd: st.toEnd})
		}
	}
	s := env.NewScheduler(sched.NewScript(steps...), ticks)
	letters := map[int]string{}
	order := env.Order(0, "")
	if rs, ok := env.Store.(stores.RowShower); ok {
		s.Observe(func() string { return showRow(ctx, rs, order.Key) })
	}
	for _, dc := range spec.clients {
		c := env.SchedClient(s, dc, nil, 0)
		c.DownstreamKeyed = spec.keyed
		letters[c.ID] = dc.Name
	}
	if spec.pruner {
		letters[env.SchedPruner(s, "P", 1)] = "P"
	}
	stopWatch := history.WatchStalls(env.Hist)
	unticked := env.MeasureUnticked()
	runErr := s.Run(ctx)
	stretch := unticked()
	run := &DemoRun{Variant: variant, Lines: demoLines(s.Log()), Answers: []string{}, Caught: []string{}}
	if ttl := env.Config.LockTTL; stretch >= ttl {
		run.Outran = fmt.Sprintf("the machine let %v of real time pass between the script's clock ticks, past the LockTTL of %v: a claim may have gone stale by the server's clock, not by the script",
			stretch.Round(time.Millisecond), ttl)
	}
	j := o.Finish(ctx, env, stopWatch, true, false)
	var violations []check.Violation
	for _, c := range check.Failed(j.Checkers) {
		run.Caught = append(run.Caught, c.Checker)
		violations = append(violations, c.Violations...)
	}
	answers := env.Hist.Answers()
	sort.SliceStable(answers, func(i, j int) bool { return letters[answers[i].Client] < letters[answers[j].Client] })
	for _, a := range answers {
		got := fmt.Sprintf("%d %q", a.Status, a.Response.Body)
		if a.Replayed {
			got = "replay of " + got
		}
		if a.Err != "" {
			got = a.Err
		}
		run.Answers = append(run.Answers, fmt.Sprintf("%s: %s (%d attempt(s))", letters[a.Client], got, a.Attempts))
	}
	run.Charges, run.ChargeIDs = chargesOf(env.Ledger, order.ID, func(c int) string { return letters[c] })
	ids := run.ChargeIDs
	switch {
	case run.Charges > 1:
		run.Harm = fmt.Sprintf("DOUBLE CHARGE: order %s charged %d times (%s)", order.ID, run.Charges, strings.Join(ids, ", "))
	case len(violations) > 0:
		run.Harm = "BROKEN: " + renameClients(violations[0].Detail, letters)
		if len(ids) > 0 {
			run.Harm += "; charged " + strings.Join(ids, ", ")
		}
	case run.Charges == 1:
		run.Harm = fmt.Sprintf("no harm: order %s charged once (%s); every answer agrees", order.ID, ids[0])
	default:
		run.Harm = fmt.Sprintf("no harm: order %s not charged, and no answer says it was", order.ID)
	}
	if runErr != nil {
		run.Lines = append(run.Lines, DemoLine{Text: "the scheduler gave up: " + runErr.Error()})
	}
	return run, nil
}

var (
	schemaRE = regexp.MustCompile(`"[A-Za-z0-9_]+"\."idempotency_keys"`)
	clientRE = regexp.MustCompile(`client (\d+)`)
)

// demoLines turns a scheduler log into the demo's lines: each statement a
// client ran (in full, whitespace collapsed), the clock ticks, the blocked
// clients, and on each client's first line after the scheduler switched
// to it, the failpoints of the switch.
func demoLines(log []sched.Event) []DemoLine {
	var out []DemoLine
	at := map[string]string{}
	from := map[string]string{} // a client let run, until its next line
	last := ""                  // the client of the last line
	for _, e := range log {
		switch e.Kind {
		case sched.Parked:
			at[e.Client] = e.Failpoint
		case sched.Granted:
			from[e.Client] = e.Failpoint
		case sched.Statement:
			l := DemoLine{Client: e.Client, Text: e.Result}
			switch e.Stmt {
			case "":
			case "BEGIN IMMEDIATE", "COMMIT": // SQLite's transaction brackets: implied by the statements
				continue
			default:
				l = DemoLine{Client: e.Client, Text: strings.Join(strings.Fields(schemaRE.ReplaceAllString(e.Stmt, "idempotency_keys")), " "), Result: e.Result}
			}
			if fp, ok := from[e.Client]; ok {
				delete(from, e.Client)
				if e.Client != last {
					l.Switch = e.Client + " runs from " + fp
					if last != "" && at[last] != "" {
						l.Switch = last + " waits at " + at[last] + "; " + l.Switch
					}
				}
			}
			last = e.Client
			out = append(out, l)
		case sched.Observed: // the row after the last line's step
			if n := len(out); n > 0 && out[n-1].Row == "" {
				out[n-1].Row = e.Value
			}
		case sched.Acted:
			var waiting []string
			for c, fp := range at {
				if fp == faults.RunAfterClaim || fp == faults.RunAfterWork {
					waiting = append(waiting, c+" waits at "+fp)
				}
			}
			sort.Strings(waiting)
			text := "the clock moves past LockTTL"
			if len(waiting) > 0 {
				text += " (" + strings.Join(waiting, ", ") + ": its claim is now stale)"
			}
			out = append(out, DemoLine{Text: text})
		case sched.Blocked:
			out = append(out, DemoLine{Client: e.Client, Text: "is blocked inside the store (a lock held by a waiting client); another client runs"})
		}
	}
	return out
}

// showRow is the key's row for a demo's step, read within a bound: a
// store that waited for a lock would stall the scheduler.
func showRow(ctx context.Context, rs stores.RowShower, key stores.KeyRef) string {
	ctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	row, err := rs.ShowRow(ctx, key)
	if err != nil {
		return "(cannot read the row: " + err.Error() + ")"
	}
	return row
}

// renameClients writes the demo's letters for the history's client ids.
func renameClients(s string, letters map[int]string) string {
	return clientRE.ReplaceAllStringFunc(s, func(m string) string {
		var id int
		fmt.Sscanf(m, "client %d", &id)
		if l, ok := letters[id]; ok {
			return "client " + l
		}
		return m
	})
}
