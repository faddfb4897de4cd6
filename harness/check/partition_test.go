package check

import (
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
		got := keyPorcupineOps(m, keyed[k], prunes)
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
	if part := keyPorcupineOps(m, kops, nil); part != nil {
		t.Fatalf("%d operations of an unanswered key went to porcupine", len(part))
	}
	kops = append(kops, history.Op{Client: 99, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0, ID: 99},
		Output: models.Output{Decision: stores.Decision{Outcome: stores.InFlight, DecidedAt: t0}}, Call: 200, Return: 210})
	if part := keyPorcupineOps(m, kops, nil); len(part) != len(kops) {
		t.Fatalf("%d of %d operations of an answered key went to porcupine", len(part), len(kops))
	}
}
