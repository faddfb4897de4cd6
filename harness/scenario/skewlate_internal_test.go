package scenario

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestSkewCountsLateTakeoversApart: a skewed client's takeover of a claim
// younger than LockTTL is the skew's finding; one of a claim already a
// LockTTL old by the real clock (a slow store, calls one at a time) is
// counted apart, as late, for the note that the skew was not tested
// there: the run passed with no takeover and no note.
func TestSkewCountsLateTakeoversApart(t *testing.T) {
	const ttl = 250 * time.Millisecond
	ms := int64(time.Millisecond)
	var ops []history.Op
	claim := func(client int, key, tok string, call, ret int64, takeover bool) {
		ops = append(ops, history.Op{Client: client,
			Input:  models.Input{Kind: models.Begin, Key: stores.KeyRef{Tenant: "t", Key: key}, Fingerprint: "f"},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: stores.Token(tok), Takeover: takeover}},
			Call:   call * ms, Return: ret * ms})
	}
	claim(1, "young", "a", 0, 5, false)
	claim(2, "young", "b", 50, 60, true) // 60 ms after the claim: the skew
	claim(3, "late", "c", 0, 5, false)
	claim(4, "late", "d", 400, 420, true) // 420 ms after: stale by every clock
	takeovers, _, late := skewFindings(ops, 0, ttl)
	if takeovers != 1 || late != 1 {
		t.Fatalf("takeovers %d, late %d; want 1 and 1", takeovers, late)
	}
}
