package check

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestReplaysOfOneAnswerMerge: the recorded shape that left a correct
// memory store's race undecided (22 clients, 48 calls on one key): the
// retries of an order are answered in-flight, then replayed while the
// owner's save is still returning, and one 409 falls between. porcupine
// tried every subset of the replays before each other order; merged, the
// key is decided at once, and still linearizable.
func TestReplaysOfOneAnswerMerge(t *testing.T) {
	m := models.Config{LockTTL: 165 * time.Millisecond, Retention: time.Hour}
	t0 := time.Date(2026, 12, 2, 7, 19, 52, 0, time.UTC)
	k := stores.KeyRef{Tenant: "T0", Key: "key-001"}
	at := func(us int64) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	resp := stores.Response{Status: 201, Body: "charged ch_19"}
	begin := func(c int, call, ret int64, out stores.Decision) history.Op {
		out.DecidedAt = at(call)
		return history.Op{Client: c, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: at(call)},
			Output: models.Output{Decision: out}, Call: call, Return: ret}
	}
	ops := []history.Op{begin(0, 5187, 5188, stores.Decision{Outcome: stores.Claimed, Token: "a"})}
	for c := 1; c <= 20; c++ {
		ops = append(ops, begin(c, 7300+int64(c), 21200+int64(c), stores.Decision{Outcome: stores.InFlight}))
	}
	ops = append(ops, history.Op{Client: 0, Input: models.Input{Kind: models.Complete, Key: k, Token: "a", Response: resp, Now: at(22335)},
		Call: 22335, Return: 56062})
	for c := 1; c <= 20; c++ {
		ops = append(ops, begin(c, 29000+int64(c)*200, 56100+int64(c), stores.Decision{Outcome: stores.Replay, Response: resp}))
	}
	ops = append(ops, begin(21, 48098, 48100, stores.Decision{Outcome: stores.InFlight}))
	var part []porcupine.Operation
	for _, op := range ops {
		part = append(part, porcupineOp(op))
	}
	merged, n := mergeReplays(part)
	if n != 19 {
		t.Fatalf("merged %d replays, want 19 (their calls share a moment)", n)
	}
	if res := porcupine.CheckOperationsTimeout(models.Porcupine(m), merged, 10*time.Second); res != porcupine.Ok {
		t.Fatalf("merged history: %v, want linearizable", res)
	}
}

// TestMergeReplaysIsExact compares porcupine's verdict on random one-key
// histories with and without mergeReplays. Each history is a correct
// store's run (models.Decide played in order at points 10 apart, each
// call stretched around its point so that calls overlap: bursts of
// retries are replayed together), half of them with one answer then
// changed (another save's answer replayed, a 409 for a replay, a fence
// flipped). Saves may write one answer with several tokens, which the
// merge must leave alone. It must never change a verdict, and must
// happen in many histories of both verdicts.
func TestMergeReplaysIsExact(t *testing.T) {
	m, _ := trialModel()
	exactOnTrials(t, m, 3000, 200, 100, randomKeyHistory, func(part []porcupine.Operation) ([]porcupine.Operation, int) { return mergeReplays(part) })
}

// exactOnTrials checks that merge never changes porcupine's verdict on
// trials of gen's one-key histories under m, and that it merges in at
// least minPass linearizable and minFail non-linearizable ones.
func exactOnTrials(t *testing.T, m models.Config, trials, minPass, minFail int,
	gen func(*testing.T, int, *rand.Rand, models.Config) ([]porcupine.Operation, []history.Op),
	merge func([]porcupine.Operation) ([]porcupine.Operation, int)) {
	t.Helper()
	model := models.Porcupine(m)
	r := rand.New(rand.NewSource(1))
	verdicts := map[bool]int{}
	mergedIn := map[bool]int{}
	for trial := range trials {
		part, ops := gen(t, trial, r, m)
		want := porcupine.CheckOperations(model, part)
		merged, n := merge(part)
		if got := porcupine.CheckOperations(model, merged); got != want {
			t.Fatalf("trial %d: linearizable %v with %d calls merged, %v without\n%v", trial, got, n, want, ops)
		}
		verdicts[want]++
		if n > 0 {
			mergedIn[want]++
		}
	}
	if mergedIn[true] < minPass || mergedIn[false] < minFail {
		t.Fatalf("the trials did not exercise the merge both ways: merged in %v, verdicts %v", mergedIn, verdicts)
	}
	t.Logf("verdicts %v; merged in %v", verdicts, mergedIn)
}

// trialModel is the model randomKeyHistory's trials are judged by.
func trialModel() (models.Config, porcupine.Model) {
	m := models.Config{LockTTL: 10 * time.Second, Retention: 40 * time.Second}
	return m, models.Porcupine(m)
}

// randomKeyHistory is one trial of the decision table on one key (see
// TestMergeReplaysIsExact): its porcupine operations, and its calls.
func randomKeyHistory(t *testing.T, trial int, r *rand.Rand, m models.Config) ([]porcupine.Operation, []history.Op) {
	p := newKeyPlay(m)
	for i := range 6 + r.Intn(14) {
		p.clock = p.clock.Add(time.Duration(r.Intn(4)) * time.Second)
		if r.Intn(6) == 0 { // past the retention: the record may be gone
			p.clock = p.clock.Add(m.Retention)
		}
		in := models.Input{Key: p.key, Now: p.clock}
		var out models.Output
		switch x := r.Intn(10); {
		case x < 6: // a Begin, the most common call
			in.Kind, in.Fingerprint = models.Begin, "fp"
			out = p.decide(in)
		case x < 8:
			in.Kind, in.Token = models.Complete, p.s.Token
			if r.Intn(4) == 0 {
				in.Token = stores.Token(fmt.Sprint(1 + r.Intn(p.tokens+1)))
			}
			in.Response = stores.Response{Status: 201, Body: fmt.Sprint("x", in.Token)}
			if r.Intn(3) == 0 { // an answer other saves may write too
				in.Response.Body = "same"
			}
		default:
			in.Kind, in.Token = models.Release, p.s.Token
		}
		p.play(t, trial, r, in, out, 10*int64(i), 35)
	}
	ops := p.ops
	if r.Intn(2) == 0 { // change one answer
		op := &ops[r.Intn(len(ops))]
		switch {
		case op.Input.Kind == models.Begin && op.Output.Decision.Outcome == stores.Replay && r.Intn(2) == 0:
			op.Output.Decision.Response.Body = fmt.Sprint("x", 1+r.Intn(p.tokens+1))
		case op.Input.Kind == models.Begin && op.Output.Decision.Outcome == stores.Replay:
			op.Output.Decision.Outcome = stores.InFlight
		case op.Input.Kind == models.Begin:
			op.Output.Decision.Outcome, op.Output.Decision.Response = stores.Replay, stores.Response{Status: 201, Body: "same"}
		default:
			op.Output.Fenced = !op.Output.Fenced
		}
	}
	return porcupineOpsOf(ops), ops
}

// keyPlay plays the decision table on one key, call by call, as a correct
// store would answer (randomKeyHistory, inFlightHistory).
type keyPlay struct {
	m      models.Config
	key    stores.KeyRef
	s      models.State
	clock  time.Time
	tokens int
	ops    []history.Op
}

func newKeyPlay(m models.Config) *keyPlay {
	return &keyPlay{m: m, key: stores.KeyRef{Tenant: "t", Key: "k"}, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// decide is what the decision table answers a Begin in the key's state
// now, a fresh token for a claim.
func (p *keyPlay) decide(in models.Input) models.Output {
	exp := models.Decide(p.m, p.s, in.Fingerprint, p.clock)
	out := models.Output{Decision: stores.Decision{Outcome: exp.Outcome, Response: exp.Response, DecidedAt: p.clock, Takeover: exp.Takeover}}
	if exp.Outcome == stores.Claimed {
		p.tokens++
		out.Decision.Token = stores.Token(fmt.Sprint(p.tokens))
	}
	return out
}

// play records the call in → out at point at, stretched up to spread
// either way so that calls overlap, and moves the key to one of the
// states it may then be in; a write the state does not allow is fenced.
func (p *keyPlay) play(t *testing.T, trial int, r *rand.Rand, in models.Input, out models.Output, at, spread int64) {
	next := models.Step(p.m, p.s, in, out)
	if len(next) == 0 && in.Kind != models.Begin {
		out.Fenced = true
		next = models.Step(p.m, p.s, in, out)
	}
	if len(next) == 0 {
		t.Fatalf("trial %d: the generator's own call %v → %v is illegal in %v", trial, in, out, p.s)
	}
	p.s = next[r.Intn(len(next))]
	p.ops = append(p.ops, history.Op{Input: in, Output: out, Call: at - r.Int63n(spread), Return: at + r.Int63n(spread)})
}

// porcupineOpsOf is ops as porcupine operations.
func porcupineOpsOf(ops []history.Op) []porcupine.Operation {
	part := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		part = append(part, porcupineOp(op))
	}
	return part
}

// TestReplaysOfAnswersSavedTwiceStayApart: the answer "same" is saved by
// two claims, one life apart (retention ends the first). A replay of it in
// each life, their calls overlapping only while the second claim is in
// flight, is linearizable, but not as one call over the overlap: so
// mergeReplays must leave answers saved by more than one token alone.
func TestReplaysOfAnswersSavedTwiceStayApart(t *testing.T) {
	m := models.Config{LockTTL: 10 * time.Second, Retention: 20 * time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	same := stores.Response{Status: 201, Body: "same"}
	op := func(call, ret int64, in models.Input, out models.Output) porcupine.Operation {
		in.Key = k
		return porcupineOp(history.Op{Input: in, Output: out, Call: call, Return: ret})
	}
	claim := func(tok stores.Token, at time.Time) models.Output {
		return models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: tok, DecidedAt: at}}
	}
	replay := models.Output{Decision: stores.Decision{Outcome: stores.Replay, Response: same, DecidedAt: t0.Add(30 * time.Second)}}
	later := t0.Add(time.Minute)
	part := []porcupine.Operation{
		op(0, 1, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0}, claim("1", t0)),
		op(2, 3, models.Input{Kind: models.Complete, Token: "1", Response: same, Now: t0}, models.Output{}),
		op(10, 50, models.Input{Kind: models.Begin, Fingerprint: "fp"}, replay),                                  // in the first life
		op(30, 31, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: later}, claim("2", later)),           // retention over: a second life
		op(40, 70, models.Input{Kind: models.Begin, Fingerprint: "fp"}, replay),                                  // in the second
		op(60, 61, models.Input{Kind: models.Complete, Token: "2", Response: same, Now: later}, models.Output{}), // after both calls met
	}
	model := models.Porcupine(m)
	if res := porcupine.CheckOperations(model, part); !res {
		t.Fatal("the history is linearizable: the first replay before the second claim, the second after its save")
	}
	if merged, n := mergeReplays(part); n != 0 || len(merged) != len(part) {
		t.Fatalf("merged %d replays of an answer two tokens saved", n)
	}
	one := slices.Clone(part)
	one[2].Call, one[2].Return = 40, 50 // the two replays as one call over their overlap
	one = slices.Delete(one, 4, 5)
	if porcupine.CheckOperations(model, one) {
		t.Fatal("the replays as one call over their overlap should not be linearizable: the key is in flight there")
	}
}
