package harness

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestMeasureKeepsTheFirstUnknownError: a scenario's counts keep the
// error of its first call of unknown outcome, so that an undecided run
// names it (a Postgres container killed mid-run left 240 calls failing
// to connect, and the run said only that no final probe ran); a fault
// injector's lost answer and the client's own deadline are no store
// error, and are passed over.
func TestMeasureKeepsTheFirstUnknownError(t *testing.T) {
	h := history.New()
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	unknown := func(err string, lost, deadline bool) {
		h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key}, Output: models.Output{Unknown: true},
			Call: 1, Return: history.Never, Err: err, Lost: lost, Deadline: deadline})
	}
	unknown("answer lost by the fault injector", true, false)
	unknown("context deadline exceeded", false, true)
	unknown("dial tcp 127.0.0.1:5432: connect: connection refused", false, false)
	unknown("another", false, false)
	var res results.ScenarioResult
	measure(&res, h, history.NewLedger(), scenario.Record{})
	if res.Outcomes["unknown"] != 4 || res.FirstUnknown != "dial tcp 127.0.0.1:5432: connect: connection refused" {
		t.Fatalf("unknown %d, first %q", res.Outcomes["unknown"], res.FirstUnknown)
	}
	// The lost answer is a fault, in the faults column (it said none
	// beside 152 answers lossy-exec.py lost).
	if res.Faults["lost-answer"] != 1 {
		t.Fatalf("faults %v, want the lost answer", res.Faults)
	}
}

// TestMeasureSaysTheStoreProcessDied: the calls cut by a store process
// that died on its own (stores.ErrProcessDied among their errors, as a
// worker's history or a saved one holds them) and the deaths the run's
// stores counted, idle ones included, are said in a note; a crash the
// harness injected is not such a death, and a run with neither has no
// note.
func TestMeasureSaysTheStoreProcessDied(t *testing.T) {
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	run := func(errs []string, rec scenario.Record) []string {
		h := history.New()
		for _, err := range errs {
			h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key}, Output: models.Output{Unknown: true},
				Call: 1, Return: history.Never, Err: err})
		}
		var res results.ScenarioResult
		measure(&res, h, history.NewLedger(), rec)
		return res.Notes
	}
	died := stores.ErrProcessDied.Error() + " (it exited (exit status 1); its stderr: KeyError: 'token')"
	if n := run([]string{"the store process died before it answered: killed at failpoint begin.after-select of another call (a crash)"}, scenario.Record{}); len(n) != 0 {
		t.Errorf("a crash the harness injected is noted as a death: %q", n)
	}
	n := run([]string{died, died}, scenario.Record{})
	if len(n) != 1 || !strings.Contains(n[0], "died on its own, with 2 call(s) in flight") || !strings.Contains(n[0], "KeyError") {
		t.Errorf("two cut calls: %q", n)
	}
	n = run(nil, scenario.Record{Deaths: 1, FirstDeath: "idle death"})
	if len(n) != 1 || !strings.Contains(n[0], "died on its own 1 time(s), with 0 call(s) in flight") || !strings.Contains(n[0], "idle death") {
		t.Errorf("an idle death: %q", n)
	}
}

// TestMeasureSaysTheStoreLeftCallsUnanswered: calls cut because the
// store never answered them (stores.ErrUnanswered among their errors) are
// said in a note with the first one's error; other unknown outcomes are
// not.
func TestMeasureSaysTheStoreLeftCallsUnanswered(t *testing.T) {
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	h := history.New()
	for _, err := range []string{"connection refused", "exec store s: " + stores.ErrUnanswered.Error() + ": request 9 (complete) unanswered after 1m0s", "exec store s: " + stores.ErrUnanswered.Error() + ": request 12"} {
		h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Complete, Key: key}, Output: models.Output{Unknown: true},
			Call: 1, Return: history.Never, Err: err})
	}
	var res results.ScenarioResult
	measure(&res, h, history.NewLedger(), scenario.Record{})
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "never answered 2 call(s)") || !strings.Contains(res.Notes[0], "request 9 (complete)") {
		t.Fatalf("notes %q", res.Notes)
	}
}

// TestMeasureSaysTheStoreRefusedCalls: calls the store itself refused as
// not applied are said in a note, with their count of the run's and the
// first one's error (a Python SQLite store refused a quarter of its calls
// under a PASS that named none); one the client's deadline cut, or a
// fault injector's, is not the store's refusal, and a run without any has
// no note.
func TestMeasureSaysTheStoreRefusedCalls(t *testing.T) {
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	run := func(refusals ...history.Op) []string {
		h := history.New()
		h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "a"}}, Call: 1, Return: 2})
		for _, op := range refusals {
			op.Client, op.Input, op.Output.NotApplied, op.Call, op.Return = 2, models.Input{Kind: models.Begin, Key: key}, true, 3, 4
			h.AddOp(op)
		}
		var res results.ScenarioResult
		measure(&res, h, history.NewLedger(), scenario.Record{})
		return res.Notes
	}
	if n := run(); len(n) != 0 {
		t.Errorf("no refusal: notes %q", n)
	}
	if n := run(history.Op{Err: "deadline", Deadline: true}, history.Op{Err: "lost", Lost: true}); len(n) != 0 {
		t.Errorf("a deadline's and a fault injector's: notes %q", n)
	}
	n := run(history.Op{Err: "BEGIN IMMEDIATE: database is locked after 5000 ms"}, history.Op{Err: "again"})
	if len(n) != 1 || !strings.Contains(n[0], "refused 2 of 3 calls as not applied (first: BEGIN IMMEDIATE: database is locked") {
		t.Errorf("two refusals: notes %q", n)
	}
}

// TestMeasureLeavesUndecidedAPassItsDeathsCut: a store whose process died
// on its own at every traced call passed the scheduled scenarios, exit 0,
// nearly all of their calls cut; a pass whose calls its deaths cut in
// more than a tenth is undecided, saying why, and one cut less is a pass
// with its note.
func TestMeasureLeavesUndecidedAPassItsDeathsCut(t *testing.T) {
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	died := stores.ErrProcessDied.Error() + " (it exited (exit status 1); its stderr: unknown fields {'trace'})"
	run := func(cut, answered int) results.ScenarioResult {
		h := history.New()
		for range cut {
			h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key}, Output: models.Output{Unknown: true},
				Call: 1, Return: history.Never, Err: died})
		}
		for range answered {
			h.AddOp(history.Op{Client: 2, Input: models.Input{Kind: models.Begin, Key: key}, Output: models.Output{Decision: stores.Decision{Outcome: stores.InFlight}},
				Call: 1, Return: 2})
		}
		res := results.ScenarioResult{Verdict: check.Pass}
		measure(&res, h, history.NewLedger(), scenario.Record{})
		return res
	}
	if r := run(96, 24); r.Verdict != check.Unknown || !strings.Contains(r.WhyUndecided(), "cutting 96 of 120 calls") || !strings.Contains(r.WhyUndecided(), "unknown fields") {
		t.Errorf("96 of 120 calls cut: %s: %s", r.Verdict, r.WhyUndecided())
	}
	if r := run(1, 99); r.Verdict != check.Pass || len(r.Notes) != 1 {
		t.Errorf("1 of 100 calls cut: %s, notes %q", r.Verdict, r.Notes)
	}
}
