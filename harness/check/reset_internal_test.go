package check

import (
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestFirstReset pins when a key may have been emptied before a time t
// (grouped.firstReset < t), as the mismatch and replay-fidelity checkers
// ask it: a release of the key or a prune called strictly before t; a
// fenced release, and a release or prune declared not applied, reset
// nothing; a release of another key does not reset this one; a release
// whose answer was lost may have.
func TestFirstReset(t *testing.T) {
	a := stores.KeyRef{Tenant: "t0", Key: "a"}
	b := stores.KeyRef{Tenant: "t0", Key: "b"}
	c := stores.KeyRef{Tenant: "t0", Key: "c"}
	d := stores.KeyRef{Tenant: "t0", Key: "d"}
	u := stores.KeyRef{Tenant: "t0", Key: "u"}
	op := func(kind models.Kind, k stores.KeyRef, call int64, out models.Output) history.Op {
		return history.Op{Client: 1, Input: models.Input{Kind: kind, Key: k}, Output: out, Call: call, Return: call + 1}
	}
	claim := models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "t"}}
	ops := []history.Op{
		op(models.Begin, a, 0, claim),
		op(models.Begin, b, 0, claim),
		op(models.Begin, c, 0, claim),
		op(models.Begin, d, 0, claim),
		op(models.Begin, u, 0, claim),
		op(models.Release, a, 2, models.Output{Fenced: true}),     // superseded: released nothing
		op(models.Release, a, 3, models.Output{NotApplied: true}), // declared a no-op
		op(models.Release, c, 4, models.Output{}),                 // another key's
		op(models.Prune, stores.KeyRef{}, 5, models.Output{NotApplied: true}),
		op(models.Release, a, 10, models.Output{}),
		op(models.Release, u, 12, models.Output{Unknown: true}), // its answer lost: it may have landed
		op(models.Prune, stores.KeyRef{}, 40, models.Output{}),  // recorded before the earlier one
		op(models.Prune, stores.KeyRef{}, 20, models.Output{}),
		op(models.Release, d, 30, models.Output{}), // after the prune
	}
	g := groupByKey(ops)
	for _, tc := range []struct {
		name string
		k    stores.KeyRef
		t    int64
		want bool
	}{
		{"before any reset, past a fenced and a not-applied release and prune", a, 9, false},
		{"at the release's call: not before it", a, 10, false},
		{"after the release", a, 11, true},
		{"another key's release resets nothing here", b, 19, false},
		{"at the earliest prune's call: not before it", b, 20, false},
		{"after the earliest prune, whichever was recorded first", b, 21, true},
		{"a key released before t", c, 5, true},
		{"a key released after the prune: the prune comes first", d, 21, true},
		{"a release whose answer was lost", u, 13, true},
		{"a release whose answer was lost, at its call", u, 12, false},
	} {
		if got := g.firstReset(g.keyed[tc.k]) < tc.t; got != tc.want {
			t.Errorf("%s: key %s reset before %d is %v, want %v", tc.name, tc.k.Key, tc.t, got, tc.want)
		}
	}

	// With no prune applied, a key never released is never reset, not
	// even before a call whose answer was lost (Return is Never).
	g = groupByKey([]history.Op{
		op(models.Begin, a, 0, claim),
		op(models.Prune, stores.KeyRef{}, 5, models.Output{NotApplied: true}),
		op(models.Release, a, 6, models.Output{Fenced: true}),
	})
	if r := g.firstReset(g.keyed[a]); r != history.Never {
		t.Errorf("a key nothing emptied is reset at %d, want never (%d)", r, history.Never)
	}
}
