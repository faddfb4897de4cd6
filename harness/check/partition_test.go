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

// TestPruneGoesOnlyToKeysItCanActOn: a Prune is copied into the partition
// of a key whose operations overlap it in time (ties included) and whose
// record can be past its retention at the Prune's time; it is left out of
// a key whose operations all returned before it was called or were all
// called after it returned, of a key created too recently, and of a key
// never created. A key none of whose calls got an answer is left out
// whole.
func TestPruneGoesOnlyToKeysItCanActOn(t *testing.T) {
	m := models.Config{LockTTL: time.Second, Retention: time.Minute, Slack: time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pruneAt := t0.Add(m.Retention)
	key := func(k string) stores.KeyRef { return stores.KeyRef{Tenant: "t", Key: k} }
	claim := func(k string, call, ret int64, at time.Time) history.Op {
		return history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key(k), Fingerprint: "fp", Now: at},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "x", DecidedAt: at}}, Call: call, Return: ret}
	}
	ops := []history.Op{
		claim("before", 0, 10, t0),                                  // returned before the Prune was called
		claim("across", 5, 100, t0),                                 // spans it
		claim("young", 5, 100, pruneAt.Add(-m.Retention+2*m.Slack)), // spans it, created too recently
		{Client: 1, Input: models.Input{Kind: models.Begin, Key: key("uncreated"), Fingerprint: "fp", Now: t0},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.InFlight, DecidedAt: t0}}, Call: 5, Return: 100},
		{Client: 2, Input: models.Input{Kind: models.Prune, Now: pruneAt}, Call: 20, Return: 30},
		claim("tie", 30, 40, t0),   // called as it returned: concurrent
		claim("after", 31, 50, t0), // called after it returned
		{Client: 3, Input: models.Input{Kind: models.Begin, Key: key("unknown"), Fingerprint: "fp", Now: t0},
			Output: models.Output{Unknown: true}, Call: 1, Return: history.Never}, // may take effect any time after its call
		{Client: 4, Input: models.Input{Kind: models.Begin, Key: key("unknown"), Fingerprint: "fp", Now: t0},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.InFlight, DecidedAt: t0}}, Call: 200, Return: 210},
		// No call on this key got an answer: linearizable by itself, left out.
		{Client: 5, Input: models.Input{Kind: models.Begin, Key: key("unanswered"), Fingerprint: "fp", Now: t0},
			Output: models.Output{Unknown: true}, Call: 1, Return: history.Never},
		{Client: 6, Input: models.Input{Kind: models.Begin, Key: key("unanswered"), Fingerprint: "fp", Now: t0},
			Output: models.Output{Unknown: true}, Call: 2, Return: 50},
	}
	pops, keys := porcupineOps(m, ops)
	if keys != 8 {
		t.Fatalf("%d keys, want 8", keys)
	}
	got := map[stores.KeyRef]int{}
	for _, op := range pops {
		in := op.Input.(models.Input)
		if in.Key == key("unanswered") {
			t.Fatalf("an operation of a key no call of which got an answer went to porcupine: %+v", op)
		}
		if in.Kind == models.Prune {
			got[in.Key]++
		}
	}
	want := map[stores.KeyRef]int{key("across"): 1, key("tie"): 1, key("unknown"): 1}
	if len(got) != len(want) {
		t.Fatalf("the Prune went to %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("the Prune went to %v, want %v", got, want)
		}
	}
}

// TestKeyPorcupineOpsIsPorcupineOpsByKey: the one-key-at-a-time form of
// the history (for histories too large to draw) is, key by key, the same
// operations as the whole-history form partitioned.
func TestKeyPorcupineOpsIsPorcupineOpsByKey(t *testing.T) {
	m := models.Config{LockTTL: time.Second, Retention: time.Minute, Slack: time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ops []history.Op
	for i := range 40 {
		k := stores.KeyRef{Tenant: "t", Key: string(rune('a' + i%7))}
		at := t0.Add(time.Duration(i) * 3 * time.Second)
		ops = append(ops, history.Op{Client: i % 3, Input: models.Input{ID: i, Kind: models.Begin, Key: k, Fingerprint: "fp", Now: at},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: stores.Token(k.Key), DecidedAt: at}},
			Call:   int64(i) * 10, Return: int64(i)*10 + 25})
		if i%9 == 8 {
			ops = append(ops, history.Op{Client: 9, Input: models.Input{Kind: models.Prune, Now: at.Add(m.Retention)}, Call: int64(i) * 10, Return: int64(i)*10 + 5})
		}
	}
	pops, _ := porcupineOps(m, ops)
	whole := models.PartitionByKey(pops)
	keyed, order := history.ByKey(ops)
	var prunes []history.Op
	for _, op := range ops {
		if op.Input.Kind == models.Prune {
			prunes = append(prunes, op)
		}
	}
	if len(whole) != len(order) {
		t.Fatalf("%d partitions, %d keys", len(whole), len(order))
	}
	count := func(p []porcupine.Operation) (n, pr int) {
		for _, op := range p {
			if op.Input.(models.Input).Kind == models.Prune {
				pr++
			} else {
				n++
			}
		}
		return
	}
	totalPrunes := 0
	for i, k := range order {
		got := keyPorcupineOps(m, keyed[k], newPruneIndex(prunes))
		gn, gp := count(got)
		wn, wp := count(whole[i])
		if gn != wn || gp != wp || got[0].Input.(models.Input).Key != k {
			t.Errorf("key %s: %d ops and %d prunes, want %d and %d", k, gn, gp, wn, wp)
		}
		totalPrunes += gp
	}
	if totalPrunes == 0 {
		t.Error("no Prune acted on any key: the test shows nothing")
	}
}

// TestUnansweredKeyIsLinearizableByItself: a key none of whose calls got an
// answer (a store that refuses the key) gives porcupine nothing, however
// many calls it has, so its search cannot grow with them; a key with one
// answer among them is checked whole.
func TestUnansweredKeyIsLinearizableByItself(t *testing.T) {
	m := models.Config{LockTTL: time.Second, Retention: time.Minute, Slack: time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := stores.KeyRef{Tenant: "t", Key: "p\x00"}
	var kops []history.Op
	for i := range 40 {
		kops = append(kops, history.Op{Client: i, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0, ID: i},
			Output: models.Output{Unknown: true}, Call: int64(i), Return: int64(i + 100)})
	}
	if part := keyPorcupineOps(m, kops, newPruneIndex(nil)); part != nil {
		t.Fatalf("%d operations of an unanswered key went to porcupine", len(part))
	}
	kops = append(kops, history.Op{Client: 99, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0, ID: 99},
		Output: models.Output{Decision: stores.Decision{Outcome: stores.InFlight, DecidedAt: t0}}, Call: 200, Return: 210})
	if part := keyPorcupineOps(m, kops, newPruneIndex(nil)); len(part) != len(kops) {
		t.Fatalf("%d of %d operations of an answered key went to porcupine", len(part), len(kops))
	}
}

// TestPrunesOfOneGapAreOne: the prunes that fall in one gap between a
// key's operations are one, the latest by its clock; a prune overlapping
// an operation stays. And the reduction is exact: on random one-key
// histories with prunes, some overlapping, some in gaps, some with clocks
// out of order, porcupine decides the reduced partition as it decides the
// partition with every prunable Prune copied in, both ways (a history the
// store broke included: a replay after the key may have been pruned, a
// claim where only an early prune could have emptied the key).
func TestPrunesOfOneGapAreOne(t *testing.T) {
	m := models.Config{LockTTL: time.Second, Retention: 10 * time.Second, Slack: 0}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	prune := func(call, ret int64, at time.Time) history.Op {
		return history.Op{Client: 9, Input: models.Input{Kind: models.Prune, Now: at}, Call: call, Return: ret}
	}
	kops := []history.Op{
		{Client: 1, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "a", DecidedAt: t0}}, Call: 0, Return: 10},
		{Client: 2, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0.Add(time.Minute)},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "b", DecidedAt: t0.Add(time.Minute)}}, Call: 100, Return: 110},
	}
	prunes := []history.Op{
		prune(20, 30, t0.Add(20*time.Second)), prune(40, 50, t0.Add(50*time.Second)), prune(60, 70, t0.Add(30*time.Second)), // one gap
		prune(105, 106, t0.Add(70*time.Second)), // overlaps the second claim
	}
	sp := keySpan{first: 0, last: 110}
	for _, op := range kops {
		sp.add(op)
	}
	got := newPruneIndex(prunes).prunesInPartition(m, sp, kops)
	if len(got) != 2 || !got[0].Input.Now.Equal(t0.Add(50*time.Second)) || got[1].Call != 105 {
		t.Fatalf("prunes kept: %+v, want the gap's latest (at +50s) and the overlapping one", got)
	}

	model := models.Porcupine(m)
	r := rand.New(rand.NewSource(1))
	decided := map[porcupine.CheckResult]int{}
	collapsed := 0
	for trial := range 3000 {
		var ops, all []history.Op
		at, clock := int64(0), t0
		tokens := 0
		for range 3 + r.Intn(6) {
			at += int64(1 + r.Intn(20))
			clock = clock.Add(time.Duration(r.Intn(8)) * time.Second)
			call, ret := at, at+int64(1+r.Intn(15))
			switch r.Intn(5) {
			case 0, 1:
				out := models.Output{Decision: stores.Decision{DecidedAt: clock}}
				switch r.Intn(3) {
				case 0:
					tokens++
					out.Decision.Outcome, out.Decision.Token = stores.Claimed, stores.Token(fmt.Sprint(tokens))
				case 1:
					out.Decision.Outcome = stores.InFlight
				default:
					out.Decision.Outcome, out.Decision.Response = stores.Replay, stores.Response{Status: 201, Body: "x"}
				}
				ops = append(ops, history.Op{Client: r.Intn(3), Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: clock}, Output: out, Call: call, Return: ret})
			case 2:
				ops = append(ops, history.Op{Client: r.Intn(3), Input: models.Input{Kind: models.Complete, Key: k, Token: stores.Token(fmt.Sprint(1 + r.Intn(tokens+1))), Now: clock,
					Response: stores.Response{Status: 201, Body: "x"}}, Output: models.Output{Fenced: r.Intn(2) == 0}, Call: call, Return: ret})
			default: // a run of prunes, their clocks in any order
				for range 1 + r.Intn(3) {
					all = append(all, prune(at, at+int64(r.Intn(3)), clock.Add(time.Duration(r.Intn(20))*time.Second)))
					at += int64(1 + r.Intn(4))
				}
			}
		}
		if len(ops) == 0 {
			continue
		}
		sp := keySpan{first: ops[0].Call, last: ops[0].Return}
		for _, op := range ops {
			sp.add(op)
		}
		full := make([]porcupine.Operation, 0, len(ops)+len(all))
		for _, op := range ops {
			full = append(full, porcupineOp(op))
		}
		for _, p := range all {
			if sp.prunable(m, p) {
				full = append(full, prunePorcupineOp(p, k))
			}
		}
		want := porcupine.CheckOperations(model, full)
		reduced := keyPorcupineOps(m, ops, newPruneIndex(all))
		if len(reduced) < len(full) {
			collapsed++
		}
		if got := porcupine.CheckOperations(model, reduced); got != want {
			t.Fatalf("trial %d: the reduced partition is linearizable=%v, the full one %v:\nops %+v\nprunes %+v", trial, got, want, ops, all)
		}
		decided[map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[want]]++
	}
	if decided[porcupine.Ok] == 0 || decided[porcupine.Illegal] == 0 || collapsed < 100 {
		t.Fatalf("the random histories were all alike (%v), or few had prunes to make one (%d): the test shows nothing", decided, collapsed)
	}
	t.Logf("%v; %d histories had prunes of one gap made one", decided, collapsed)
}
