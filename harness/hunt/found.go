package hunt

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// A mutant without a scripted interleaving (demoSpecs) still has a demo:
// it is hunted with the scenario meant to kill it, the killing episode is
// shrunk to its shortest interleaving, and that episode (the recorded
// choices of a scheduled scenario, or the same round and seed of another)
// then runs on the correct store with correct clients. So every mutant the
// registry lists, store side, client side or configuration, has a demo,
// and a new mutant has one the day it is registered.

// foundBudget bounds the hunt of a demo; foundShrink its shrinking.
// foundKeys are the keys per round of a scenario that is not scheduled.
// A hunt stops at its first kill, so the budget costs time only when the
// mutant survives; it allows a few rounds of the slowest scenario: a
// failover round on a loaded machine took over 30 s, and at 30 s the
// asynchronous-replication demo got one round, which does not always
// lose a claim.
//
// foundMinRounds are the rounds (or episodes) a demo's hunt runs however
// long they take: at 90 s the asynchronous-replication demo once got a
// single failover round beside the test suite, and that round lost no
// claim.
// (Hunt raises the keys to RateKeys when the mutant's killer judges a
// rate.)
const (
	foundBudget    = 90 * time.Second
	foundShrink    = 3 * time.Second
	foundMinRounds = 3
	foundKeys      = 2
)

// story says what a mutant re-creates, in a line.
func story(mutant string) string {
	m, _ := stores.LookupMutant(mutant)
	if m.Side == stores.ClientSide {
		return "a client " + m.Bug
	}
	return "a store that " + m.Bug
}

// foundDemo hunts the mutant, then runs the killing episode on the correct
// store.
func foundDemo(ctx context.Context, o harness.Options, mutant string) (*DemoInfo, *DemoRun, *DemoRun, error) {
	name, side, ok := MutantScenario(mutant)
	if !ok {
		return nil, nil, nil, fmt.Errorf("unknown mutant %q", mutant)
	}
	o = OptionsFor(o)
	sc, _ := scenario.Lookup(name)
	info := &DemoInfo{Mutant: mutant, Store: o.Backend.Name, Side: side, Scenario: name, Found: true,
		Story: story(mutant), LockTTL: o.LockTTLFor(sc).String()}
	k, err := Hunt(ctx, o, mutant, Options{Budget: foundBudget, MinEpisodes: foundMinRounds, Keys: foundKeys, Shrink: foundShrink})
	if err != nil {
		return info, nil, nil, err
	}
	if k.Skipped != "" {
		return info, nil, nil, fmt.Errorf("demo %s: scenario %s cannot run on %s: %s", mutant, name, o.Backend.Name, k.Skipped)
	}
	if !k.Killed {
		return info, nil, nil, fmt.Errorf("%w: demo %s: no checker caught it in %s of scenario %s on %s (%d episode(s))", ErrNotCaught, mutant, foundBudget, name, o.Backend.Name, k.Episodes)
	}
	order, ledger := orderOf(k.hist, k.key), k.ledger
	bad := &DemoRun{Variant: mutant, Lines: demoLines(k.log), Trace: orderTrace(k.hist, k.ledger, order), Answers: []string{},
		Caught: preferred(k.Checkers), Harm: "HARM: " + k.Detail}
	if sc.Scheduled {
		// The same episode again, the key's row read between its steps;
		// kept if it kills alike (a replay takes back every choice).
		om := o
		om.Variant = mutant
		if ep, err := replay(ctx, om, name, scenario.EpisodeRecord{Key: k.episodeKey, Choices: k.choices}, true); err == nil && ep.Err == nil {
			again := &Kill{}
			if judge(again, ep.Checks, ep.Hist, ep.Ledger) && again.Checker == k.Checker {
				order, ledger = orderOf(ep.Hist, again.key), ep.Ledger
				bad.Lines, bad.Trace = demoLines(ep.Log), orderTrace(ep.Hist, ep.Ledger, order)
				bad.Caught, bad.Harm = preferred(again.Checkers), "HARM: "+again.Detail
			}
		}
	}
	if bad.Lines == nil {
		bad.Lines = []DemoLine{}
	}
	bad.Charges, bad.ChargeIDs = chargesOf(ledger, order, clientNumber)
	good, err := correctRun(ctx, o, name, k, order)
	return info, bad, good, err
}

// preferred orders checker names as check.Preference does.
func preferred(names []string) []string {
	out := []string{}
	for _, p := range check.Preference {
		for _, n := range names {
			if n == p {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// correctRun runs the kill's episode (or round) again on the correct store
// with correct clients, and judges it.
func correctRun(ctx context.Context, o harness.Options, name string, k *Kill, order string) (*DemoRun, error) {
	o.Variant = stores.Correct
	sc, _ := scenario.Lookup(name)
	var (
		res       []check.Result
		hist      *history.History
		ledger    *history.Ledger
		lines     []DemoLine
		notJudged string
	)
	if sc.Scheduled {
		ep, err := replay(ctx, o, name, scenario.EpisodeRecord{Key: k.episodeKey, Choices: k.choices}, true)
		if err != nil {
			return nil, fmt.Errorf("%w (correct store)", err)
		}
		res, hist, ledger, lines = ep.Checks, ep.Hist, ep.Ledger, demoLines(ep.Log)
		if ep.Err != nil {
			lines = append(lines, DemoLine{Text: "the scheduler gave up: " + ep.Err.Error()})
		}
	} else {
		o.Scenarios, o.Keys = []string{name}, foundKeys // as the hunt ran it
		r, err := harness.RunScenario(ctx, o, sc, harness.NewRunID(), k.round, k.round, func(harness.Progress) {})
		if err != nil {
			return nil, fmt.Errorf("%w (correct store)", err)
		}
		res, hist, ledger = r.Checkers, r.History(), r.Ledger()
		if r.Verdict == check.Unknown {
			notJudged = r.Error
		}
	}
	run := &DemoRun{Variant: stores.Correct, Lines: lines, Trace: orderTrace(hist, ledger, order), Answers: []string{}, Caught: []string{}, NotJudged: notJudged}
	if run.Lines == nil {
		run.Lines = []DemoLine{}
	}
	if ledger != nil {
		run.Charges, run.ChargeIDs = chargesOf(ledger, order, clientNumber)
	}
	var details []string
	for _, c := range check.Failed(res) {
		run.Caught = append(run.Caught, c.Checker)
		details = append(details, c.Violations[0].Detail)
	}
	switch {
	case len(details) > 0:
		run.Harm = "BROKEN on the correct store (a false alarm, or a broken store): " + details[0]
	case notJudged != "":
		run.Harm = "not judged: " + notJudged
	default:
		run.Harm = "no harm: every checker passed"
	}
	return run, nil
}

// orderOf is the order sent with a key.
func orderOf(hist *history.History, key string) string {
	for _, w := range hist.Work() {
		if w.Key.String() == key {
			return w.Order
		}
	}
	for _, a := range hist.Answers() {
		if a.Key.String() == key {
			return a.Order
		}
	}
	// A violation named by its order (at-most-once on an order whose
	// charges no one key explains: top-hop-only's) is the order itself:
	// its trace was the prunes alone.
	for _, w := range hist.Work() {
		if w.Order == key {
			return key
		}
	}
	return ""
}

// chargesOf counts the provider's effective charges of the order and
// names them, each by its client as who names it (a scripted demo's
// letters, a found one's numbers): a found demo's run said 0 charges
// beside a harm of two.
func chargesOf(l *history.Ledger, order string, who func(client int) string) (int, []string) {
	ids := []string{}
	for _, c := range l.Charges() {
		if c.Order == order && c.Effective {
			ids = append(ids, fmt.Sprintf("%s by %s", c.ID, who(c.Client)))
		}
	}
	return len(ids), ids
}

// clientNumber names a client by its number.
func clientNumber(c int) string { return fmt.Sprintf("client %d", c) }

// orderTrace merges the traces of every key sent with the order, in time
// order: a client that makes a new key per attempt spreads one order over
// several keys, and the harm shows only across them.
func orderTrace(hist *history.History, ledger *history.Ledger, order string) []string {
	keys := map[string]bool{}
	for _, w := range hist.Work() {
		if w.Order == order {
			keys[w.Key.String()] = true
		}
	}
	for _, a := range hist.Answers() {
		if a.Order == order {
			keys[a.Key.String()] = true
		}
	}
	type line struct {
		at   float64
		text string
	}
	var ls []line
	seen := map[string]bool{}
	for key := range keys {
		for _, t := range report.TraceLines(hist, ledger, key) {
			if seen[t] {
				continue // a charge or a prune, listed under each key
			}
			seen[t] = true
			if len(keys) > 1 && !strings.Contains(t, " provider ") { // which key each call sent
				t += "   [key " + key + "]"
			}
			var at float64
			fmt.Sscanf(strings.TrimSpace(t), "%fms", &at)
			ls = append(ls, line{at, t})
		}
	}
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].at < ls[j].at || ls[i].at == ls[j].at && ls[i].text < ls[j].text })
	out := []string{}
	for _, l := range ls {
		out = append(out, l.text)
	}
	return out
}

// ErrNotCaught is matched (errors.Is) by Demo's error when a demo found
// by a hunt ran its budget out and no checker caught the mutant: the
// demo's answer (exit 1 on the CLI), not a setup error.
var ErrNotCaught = errors.New("not caught")

// Verdict is a demo's last line: the harm the mutant did, the checkers
// that caught it, and what the same schedule did on the correct store.
func Verdict(info *DemoInfo, bad, good *DemoRun) string {
	caught := "no checker caught it"
	if len(bad.Caught) > 0 {
		caught = "caught by " + strings.Join(bad.Caught, ", ")
	}
	correct := good.Harm
	if info.CorrectRerun != "" {
		correct += " (" + info.CorrectRerun + ")"
	}
	return fmt.Sprintf("%s (%s side) on %s: harm done: %s; %s; the correct store, same schedule: %s",
		info.Mutant, info.Side, info.Store, strings.TrimPrefix(strings.TrimSuffix(bad.Harm, "."), "HARM: "), caught, correct)
}
