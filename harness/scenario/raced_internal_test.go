package scenario

import (
	"slices"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestUnraced: a key is raced when two of its Begins were in the store at
// once, each from its call to its return (to its error, when its outcome
// is unknown); one after the other is not raced, however close. A store
// that passes no failpoint is never held at race's rendezvous inside it,
// and its keys' Begins alone say whether they met.
func TestUnraced(t *testing.T) {
	env := &Env{Hist: history.New()}
	key := func(k string) stores.KeyRef { return stores.KeyRef{Tenant: "t", Key: k} }
	begin := func(k string, call, ret, errAt int64) {
		env.Hist.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key(k)}, Call: call, Return: ret, ErrAt: errAt})
	}
	begin("a", 0, 10, 0)
	begin("a", 5, 15, 0) // inside a's first: raced
	begin("b", 0, 10, 0)
	begin("b", 10, 20, 0) // after b's first returned: not raced
	begin("c", 0, history.Never, 30)
	begin("c", 20, 25, 0) // before c's first, unanswered, gave up at 30: raced
	begin("d", 0, 10, 0)  // alone
	got := unraced(env, map[stores.KeyRef]string{key("a"): "oa", key("b"): "ob", key("c"): "oc", key("d"): "od"})
	slices.Sort(got)
	if !slices.Equal(got, []string{"ob", "od"}) {
		t.Fatalf("unraced %v, want [ob od]", got)
	}
}
