package check

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestMergeInFlightsIsExact compares porcupine's verdict on random
// one-key histories with and without mergeInFlights. Each history is a
// correct store's run of the decision table (models.Decide played in
// order at points 10 apart, each call stretched around its point so that
// bursts of 409s overlap, owners taken over once their lease runs out),
// sometimes with a Release, a lost answer or a second life (which the
// merge must leave alone), and half of them with one answer then changed
// (a 409 decided past every lease, a 409 where a claim was due, a 409
// of another fingerprint, a claim said to be a 409). It must never change
// a verdict, and must merge in many histories of both verdicts.
func TestMergeInFlightsIsExact(t *testing.T) {
	m := models.Config{LockTTL: 10 * time.Second, Retention: 40 * time.Second, Slack: time.Second}
	exactOnTrials(t, m, 2000, 300, 150, inFlightHistory, func(part []porcupine.Operation) ([]porcupine.Operation, int) { return mergeInFlights(m, part) })
}

// inFlightHistory is one trial of TestMergeInFlightsIsExact: its
// porcupine operations, and its calls.
func inFlightHistory(t *testing.T, trial int, r *rand.Rand, m models.Config) ([]porcupine.Operation, []history.Op) {
	p := newKeyPlay(m)
	for i := range 8 + r.Intn(16) {
		p.clock = p.clock.Add(time.Duration(r.Intn(3000)) * time.Millisecond)
		if r.Intn(40) == 0 { // past the retention: a second life may begin
			p.clock = p.clock.Add(m.Retention)
		}
		in := models.Input{Key: p.key, Now: p.clock}
		var out models.Output
		switch x := r.Intn(40); {
		case x < 36: // Begins, mostly 409s while a claim is in flight
			in.Kind, in.Fingerprint = models.Begin, "fp"
			out = p.decide(in)
			if r.Intn(60) == 0 {
				out = models.Output{Unknown: true}
			}
		case x < 39:
			in.Kind, in.Token = models.Complete, p.s.Token
			if r.Intn(3) == 0 { // a stale owner's save
				in.Token = stores.Token(fmt.Sprint(1 + r.Intn(p.tokens+1)))
			}
			in.Response = stores.Response{Status: 201, Body: fmt.Sprint("x", in.Token)}
		default:
			in.Kind, in.Token = models.Release, p.s.Token
		}
		p.play(t, trial, r, in, out, 10*int64(i), 60)
	}
	ops := p.ops
	if r.Intn(2) == 0 { // change one answer
		op := &ops[r.Intn(len(ops))]
		d := &op.Output.Decision
		switch {
		case op.Input.Kind == models.Begin && d.Outcome == stores.InFlight && r.Intn(3) == 0:
			d.DecidedAt = d.DecidedAt.Add(m.LockTTL + 2*m.Slack + time.Duration(r.Intn(5))*time.Second)
		case op.Input.Kind == models.Begin && d.Outcome == stores.InFlight && r.Intn(2) == 0:
			op.Input.Fingerprint = "other"
		case op.Input.Kind == models.Begin && d.Outcome == stores.Claimed:
			d.Outcome, d.Token, d.Takeover = stores.InFlight, "", false
		case op.Input.Kind == models.Begin:
			d.Outcome, d.Response = stores.InFlight, stores.Response{}
		default:
			op.Output.Fenced = !op.Output.Fenced
		}
	}
	return porcupineOpsOf(ops), ops
}

// TestInFlightsAroundTakeoversMerge: the recorded shape that left the
// memory store's race at 256 clients undecided: a claim, hundreds of
// 409s from clients retrying while it is in flight, a takeover once its
// lease ran out, more 409s, the save. Merged, porcupine decides the key
// (linearizable), and a 409 decided past every lease still fails it.
func TestInFlightsAroundTakeoversMerge(t *testing.T) {
	m := models.Config{LockTTL: 250 * time.Millisecond, Retention: time.Hour, Slack: time.Millisecond}
	t0 := time.Date(2026, 12, 3, 10, 59, 18, 0, time.UTC)
	k := stores.KeyRef{Tenant: "t0", Key: "x/key-572"}
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	begin := func(c int, call, ret int64, d stores.Decision) history.Op {
		d.DecidedAt = at(call)
		return history.Op{Client: c, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: at(call)},
			Output: models.Output{Decision: d}, Call: call * 1e6, Return: ret * 1e6}
	}
	ops := []history.Op{begin(0, 0, 40, stores.Decision{Outcome: stores.Claimed, Token: "a"})}
	for c := 1; c <= 200; c++ { // 409s under a, in overlapping bursts
		call := int64(1 + c%180)
		ops = append(ops, begin(c, call, call+30, stores.Decision{Outcome: stores.InFlight}))
	}
	ops = append(ops, begin(201, 300, 320, stores.Decision{Outcome: stores.Claimed, Token: "b", Takeover: true}))
	for c := 202; c <= 400; c++ { // 409s under b
		call := int64(310 + c%150)
		ops = append(ops, begin(c, call, call+30, stores.Decision{Outcome: stores.InFlight}))
	}
	ops = append(ops, history.Op{Client: 0, Input: models.Input{Kind: models.Complete, Key: k, Token: "a", Now: at(330), Response: stores.Response{Status: 201, Body: "x"}},
		Output: models.Output{Fenced: true}, Call: 330e6, Return: 331e6})
	ops = append(ops, history.Op{Client: 201, Input: models.Input{Kind: models.Complete, Key: k, Token: "b", Now: at(500), Response: stores.Response{Status: 201, Body: "y"}},
		Call: 500e6, Return: 501e6})
	model := models.Porcupine(m)
	check := func(ops []history.Op) (porcupine.CheckResult, int) {
		var part []porcupine.Operation
		for _, op := range ops {
			part = append(part, porcupineOp(op))
		}
		merged, n := mergeInFlights(m, part)
		return porcupine.CheckOperationsTimeout(model, merged, 10*time.Second), n
	}
	if res, n := check(ops); res != porcupine.Ok || n < 300 {
		t.Fatalf("merged %d of 398 409s: %v, want most merged and linearizable", n, res)
	}
	// A 409 decided 300 ms after b's claim: b's lease (250 ms) had surely
	// run out, and a was taken over: no state allows it.
	late := begin(401, 600, 610, stores.Decision{Outcome: stores.InFlight})
	late.Call, late.Return = 450e6, 460e6
	if res, _ := check(append(ops, late)); res != porcupine.Illegal {
		t.Fatalf("a 409 past every lease: %v, want not linearizable", res)
	}
}

// TestInFlightsOfTwoLivesStayApart: a claim, a 409 in its life, the key
// released (or gone past its retention, a Prune) and claimed again, a
// 409 in the second life; both 409s are legal under either claim, and
// their calls overlap only between the lives, when the key is not in
// flight. The history is linearizable, but not as one call over the
// overlap: so mergeInFlights must leave a key of two lives alone.
func TestInFlightsOfTwoLivesStayApart(t *testing.T) {
	m := models.Config{LockTTL: time.Second, Retention: 100 * time.Millisecond}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	op := func(in models.Input, d stores.Decision, call, ret int64) history.Op {
		in.Key, in.Fingerprint = k, "fp"
		if in.Now.IsZero() {
			in.Now = at(call)
		}
		if in.Kind == models.Begin {
			d.DecidedAt = at(call)
		}
		return history.Op{Input: in, Output: models.Output{Decision: d}, Call: call * 1e6, Return: ret * 1e6}
	}
	for _, end := range []history.Op{
		op(models.Input{Kind: models.Release, Token: "a"}, stores.Decision{}, 20, 21),
		op(models.Input{Kind: models.Prune, Now: at(150)}, stores.Decision{}, 20, 21),
	} {
		end.Return = 20.5e6 // before the second 409 is called
		second := op(models.Input{Kind: models.Begin}, stores.Decision{Outcome: stores.Claimed, Token: "c"}, 23, 24)
		if end.Input.Kind == models.Prune {
			second.Output.Decision.DecidedAt = at(150) // past a's retention, by the clock the store judges by
		}
		ops := []history.Op{
			op(models.Input{Kind: models.Begin}, stores.Decision{Outcome: stores.Claimed, Token: "a"}, 0, 1),
			op(models.Input{Kind: models.Begin}, stores.Decision{Outcome: stores.InFlight}, 10, 22),
			end,
			second,
			op(models.Input{Kind: models.Begin}, stores.Decision{Outcome: stores.InFlight}, 21, 50),
		}
		ops[4].Output.Decision.DecidedAt = at(25)
		var part []porcupine.Operation
		for _, o := range ops {
			part = append(part, porcupineOp(o))
		}
		model := models.Porcupine(m)
		if res := porcupine.CheckOperations(model, part); !res {
			t.Fatalf("after %v: the two lives' history is not linearizable; the test is wrong", end.Input.Kind)
		}
		merged, n := mergeInFlights(m, part)
		if !porcupine.CheckOperations(model, merged) {
			t.Fatalf("after %v: %d 409s merged across two lives made the history not linearizable", end.Input.Kind, n)
		}
	}
}
