package report_test

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestLostInFailover: an answer and a held claim acknowledged before a
// failover and claimed afresh after it are lost; a key that was replayed
// after it, a claim released before the fresh claim, a takeover of a
// stale claim, and a fresh claim past the retention are not.
func TestLostInFailover(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	h := history.New()
	id := 0
	key := func(k string) stores.KeyRef { return stores.KeyRef{Tenant: "t0", Key: k} }
	begin := func(client int, k string, at int, d stores.Decision) {
		id++
		h.AddOp(history.Op{Client: client, Input: models.Input{Kind: models.Begin, Key: key(k), Fingerprint: "fp", ID: id},
			Output: models.Output{Decision: d}, Call: ms(at), Return: ms(at + 1)})
	}
	call := func(kind models.Kind, client int, k string, tok stores.Token, at int) {
		id++
		h.AddOp(history.Op{Client: client, Input: models.Input{Kind: kind, Key: key(k), Token: tok, ID: id}, Call: ms(at), Return: ms(at + 1)})
	}
	claimed := func(tok stores.Token) stores.Decision { return stores.Decision{Outcome: stores.Claimed, Token: tok} }
	// Lost: saved, then claimed afresh after the failover.
	begin(0, "saved", 10, claimed("a1"))
	call(models.Complete, 0, "saved", "a1", 20)
	begin(1, "saved", 600, claimed("a2"))
	// Lost: a claim held across the failover, claimed afresh.
	begin(0, "held", 30, claimed("b1"))
	begin(1, "held", 700, claimed("b2"))
	// Kept: replayed after the failover.
	begin(0, "kept", 10, claimed("c1"))
	call(models.Complete, 0, "kept", "c1", 20)
	begin(1, "kept", 600, stores.Decision{Outcome: stores.Replay})
	// Released by its owner after the failover, then claimed: no loss.
	begin(0, "released", 40, claimed("d1"))
	call(models.Release, 0, "released", "d1", 550)
	begin(1, "released", 600, claimed("d2"))
	// A takeover of the stale claim: the record was there.
	begin(0, "stale", 40, claimed("e1"))
	begin(1, "stale", 600, stores.Decision{Outcome: stores.Claimed, Token: "e2", Takeover: true})
	// Past the retention: the store may have let it go.
	begin(0, "old", 10, claimed("f1"))
	call(models.Complete, 0, "old", "f1", 20)
	begin(1, "old", 5000, claimed("f2"))
	h.AddFault(history.Fault{Client: -1, Kind: history.FaultFailover, Failpoint: "primary", Start: ms(100), End: ms(500)})

	got := map[string]string{}
	for _, l := range report.LostInFailover(h, 2*time.Second) {
		got[l.Key.Key] = l.What
	}
	want := map[string]string{"saved": "answer", "held": "claim"}
	if len(got) != len(want) || got["saved"] != "answer" || got["held"] != "claim" {
		t.Fatalf("lost %v, want %v", got, want)
	}
	if n := len(report.LostInFailover(history.New(), time.Second)); n != 0 {
		t.Errorf("a history without a failover lost %d", n)
	}
}
