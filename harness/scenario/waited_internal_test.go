package scenario

import (
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestWaitedOnAClaim: a store whose Begin waits for a live claim's owner
// and then replays answers no Begin in flight; race said its losers came
// once the winner had saved, though they came while the claim was live.
// A Begin called after the claim was asked for and before its save began,
// and answered once the save returned, came while it was live; one
// called after the save began, or answered before it ended, did not.
func TestWaitedOnAClaim(t *testing.T) {
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	run := func(call, ret int64) bool {
		h := history.New()
		h.AddOp(history.Op{Client: 1, Input: models.Input{ID: 1, Kind: models.Begin, Key: k},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "a"}}, Call: 1, Return: 10})
		h.AddOp(history.Op{Client: 1, Input: models.Input{ID: 2, Kind: models.Complete, Key: k, Token: "a"}, Call: 30, Return: 50})
		h.AddOp(history.Op{Client: 2, Input: models.Input{ID: 3, Kind: models.Begin, Key: k},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Replay}}, Call: call, Return: ret})
		return waitedOnAClaim(h)
	}
	for _, c := range []struct {
		call, ret int64
		want      bool
	}{
		{20, 60, true},  // came while live, answered once saved: waited
		{5, 60, true},   // came while the claim was being decided
		{40, 60, false}, // came while the save was under way
		{20, 25, false}, // answered before the save: not a wait
		{55, 56, false}, // came once saved
	} {
		if got := run(c.call, c.ret); got != c.want {
			t.Errorf("a Begin at [%d, %d] beside a claim live until a save at [30, 50]: waited %v, want %v", c.call, c.ret, got, c.want)
		}
	}
}

// TestTakenEarly: a takeover answered sooner than half a LockTTL after
// the claim it took over was asked for came inside that claim's lease
// (a whole-second clock took claims over 15 to 38 ms into a 250 ms
// lease, and race said the store was slow); one answered later may be a
// slow owner's.
func TestTakenEarly(t *testing.T) {
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	claim := func(tok stores.Token, call, ret int64, takeover bool) history.Op {
		return history.Op{Input: models.Input{Kind: models.Begin, Key: k},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: tok, Takeover: takeover}}, Call: call, Return: ret}
	}
	owner := claim("a", 1, 10, false)
	const ttl = 250
	for _, c := range []struct {
		t    history.Op
		want bool
	}{
		{claim("b", 40, 50, true), true},
		{claim("b", 300, 310, true), false},
	} {
		if got := takenEarly([]history.Op{owner, c.t}, c.t, ttl); got != c.want {
			t.Errorf("a takeover at [%d, %d] of a claim asked at 1, LockTTL %d: early %v, want %v", c.t.Call, c.t.Return, ttl, got, c.want)
		}
	}
}
