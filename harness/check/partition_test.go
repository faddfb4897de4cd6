package check

import (
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestPruneGoesOnlyToKeysThatExist: a Prune is copied into the partition
// of a key whose operations overlap it in time (ties included), and left
// out of a key whose operations all returned before it was called or were
// all called after it returned.
func TestPruneGoesOnlyToKeysThatExist(t *testing.T) {
	key := func(k string) stores.KeyRef { return stores.KeyRef{Tenant: "t", Key: k} }
	begin := func(k string, call, ret int64) history.Op {
		return history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key(k), Fingerprint: "fp"}, Call: call, Return: ret}
	}
	ops := []history.Op{
		begin("before", 0, 10),  // returned before the Prune was called
		begin("across", 5, 100), // spans it
		{Client: 2, Input: models.Input{Kind: models.Prune}, Call: 20, Return: 30},
		begin("tie", 30, 40),       // called as it returned: concurrent
		begin("after", 31, 50),     // called after it returned
		begin("unknown", 1, never), // no answer: may take effect any time after
	}
	got := map[stores.KeyRef]int{}
	for _, op := range porcupineOps(ops) {
		if in := op.Input.(models.Input); in.Kind == models.Prune {
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

const never = history.Never
