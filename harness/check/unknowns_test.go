package check

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestMergeUnknownsIsExact: on random small histories of one key, full of
// unanswered Begins beside answered calls of every kind (claims and
// takeovers, 409s, replays, 422s, saves and releases accepted or fenced,
// prunes, declared lease and retention boundaries crossed), porcupine's
// verdict is the same with mergeUnknowns as without. Small, so that
// porcupine decides the unmerged history quickly; drawn so that both
// verdicts occur (the test fails if either never does).
func TestMergeUnknownsIsExact(t *testing.T) {
	m := models.Config{LockTTL: 100 * time.Millisecond, Retention: 400 * time.Millisecond, Slack: 5 * time.Millisecond}
	model := models.Porcupine(m)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	verdicts := map[porcupine.CheckResult]int{}
	mergedAny := false
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(rt, "ops")
		extra := rapid.IntRange(0, 8).Draw(rt, "unanswered weight") // some histories mostly unanswered
		var ops []porcupine.Operation
		var tokens []stores.Token
		for i := range n {
			call := int64(rapid.IntRange(0, 60).Draw(rt, "call")) * 10
			ret := call + int64(rapid.IntRange(0, 30).Draw(rt, "length"))*10
			at := t0.Add(time.Duration(call) * time.Millisecond)
			fp := rapid.SampledFrom([]string{"a", "a", "b"}).Draw(rt, "fp")
			in := models.Input{Kind: models.Begin, Key: k, Fingerprint: fp, Now: at, ID: i + 1}
			var out models.Output
			kind := rapid.IntRange(0, 7+extra).Draw(rt, "kind")
			if (kind == 5 || kind == 6) && len(tokens) == 0 {
				kind = 3 // nothing to save or release yet: a claim
			}
			switch {
			case kind <= 2 || kind > 7: // unanswered Begin: the point of the test
				out.Unknown, ret = true, history.Never
			case kind == 3:
				tok := stores.Token(fmt.Sprint("t", i))
				tokens = append(tokens, tok)
				out.Decision = stores.Decision{Outcome: stores.Claimed, Token: tok, Takeover: rapid.Bool().Draw(rt, "takeover"), DecidedAt: at}
			case kind == 4:
				outcome := rapid.SampledFrom([]stores.Outcome{stores.InFlight, stores.Mismatch, stores.Replay}).Draw(rt, "outcome")
				out.Decision = stores.Decision{Outcome: outcome, DecidedAt: at, Response: stores.Response{Status: 201}}
			case kind == 5:
				in = models.Input{Kind: models.Complete, Key: k, Token: rapid.SampledFrom(tokens).Draw(rt, "token"), Response: stores.Response{Status: 201}, Now: at, ID: i + 1}
				out.Fenced = rapid.Bool().Draw(rt, "fenced")
			case kind == 6:
				in = models.Input{Kind: models.Release, Key: k, Token: rapid.SampledFrom(tokens).Draw(rt, "token"), Now: at, ID: i + 1}
				out.Fenced = rapid.Bool().Draw(rt, "fenced")
			case kind == 7:
				in = models.Input{Kind: models.Prune, Key: k, Now: at, ID: i + 1}
			}
			ops = append(ops, porcupine.Operation{ClientId: i, Input: in, Output: out, Call: call, Return: ret})
		}
		merged, dropped := mergeUnknowns(m, ops)
		mergedAny = mergedAny || dropped > 0
		want := porcupine.CheckOperationsTimeout(model, ops, 0)
		got := porcupine.CheckOperationsTimeout(model, merged, 0)
		if got != want {
			rt.Fatalf("linearizable %v unmerged, %v merged (%d of %d calls left out)", want, got, dropped, len(ops))
		}
		verdicts[want]++
	})
	if verdicts[porcupine.Ok] == 0 || verdicts[porcupine.Illegal] == 0 || !mergedAny {
		t.Errorf("the draws never exercised both verdicts and a merge: %v, merged %v", verdicts, mergedAny)
	}
}

// TestMergeUnknownsKeepsAClaimPerGap: two unanswered Begins alike in
// every way may both be needed, one before and one after another owner's
// claim and release (each then explains a 409), so mergeUnknowns keeps
// both; of many alike, it keeps one more than the other calls.
func TestMergeUnknownsKeepsAClaimPerGap(t *testing.T) {
	m := models.Config{LockTTL: 100 * time.Millisecond, Retention: time.Hour}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var ops []porcupine.Operation
	add := func(in models.Input, out models.Output, call, ret int64) {
		in.Key, in.ID = k, len(ops)+1
		if in.Now.IsZero() {
			in.Now = at(call)
		}
		if out.Unknown {
			ret = history.Never
		}
		ops = append(ops, porcupine.Operation{ClientId: len(ops), Input: in, Output: out, Call: call, Return: ret})
	}
	unknown := func() { add(models.Input{Kind: models.Begin, Fingerprint: "fp"}, models.Output{Unknown: true}, 0, 0) }
	answered := func(d stores.Decision, call int64) {
		d.DecidedAt = at(call)
		add(models.Input{Kind: models.Begin, Fingerprint: "fp"}, models.Output{Decision: d}, call, call+1)
	}
	unknown()
	unknown()
	answered(stores.Decision{Outcome: stores.InFlight}, 10)                             // the first holds it
	answered(stores.Decision{Outcome: stores.Claimed, Token: "b", Takeover: true}, 150) // takes the stale claim over
	add(models.Input{Kind: models.Release, Token: "b", Now: at(161)}, models.Output{}, 160, 161)
	answered(stores.Decision{Outcome: stores.InFlight}, 170) // the second holds it
	model := models.Porcupine(m)
	if res := porcupine.CheckOperationsTimeout(model, ops, 0); res != porcupine.Ok {
		t.Fatalf("the history is %v, want linearizable", res)
	}
	merged, dropped := mergeUnknowns(m, ops)
	if res := porcupine.CheckOperationsTimeout(model, merged, 0); res != porcupine.Ok || dropped != 0 {
		t.Errorf("merged: %v with %d calls left out, want linearizable with both unanswered Begins kept", res, dropped)
	}
	for range 50 {
		unknown()
	}
	merged, dropped = mergeUnknowns(m, ops)
	if others := 4; dropped != 52-(others+1) {
		t.Errorf("%d of 52 alike unanswered Begins left out beside 4 other calls, want %d", dropped, 52-(others+1))
	}
	if res := porcupine.CheckOperationsTimeout(model, merged, 0); res != porcupine.Ok {
		t.Errorf("merged: %v, want linearizable", res)
	}
}
