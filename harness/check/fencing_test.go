package check_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

func TestFencing(t *testing.T) {
	takeover := func() *rec {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(2, "fp", 150, 151, claimedD("b", true))
		return r
	}
	t.Run("the stale owner's save fenced passes", func(t *testing.T) {
		r := takeover()
		r.complete(1, "a", resp, 200, 201, true, false)
		// saying what it faced: a stale writer, fenced
		want(t, r, check.Fencing, check.Pass, "; 1 writes with a stale or forged token fenced")
	})
	t.Run("a pass that met no stale writer says so", func(t *testing.T) {
		r := takeover()
		r.complete(2, "b", resp, 200, 201, false, false)
		want(t, r, check.Fencing, check.Pass, "no write was fenced (no stale or forged token met)")
	})
	t.Run("the stale owner's save accepted fails", func(t *testing.T) {
		r := takeover()
		r.complete(1, "a", resp, 200, 201, false, false)
		want(t, r, check.Fencing, check.Fail, "had taken")
	})
	t.Run("the stale owner's release accepted fails", func(t *testing.T) {
		r := takeover()
		r.release(1, "a", 200, 201, false)
		want(t, r, check.Fencing, check.Fail, "had taken")
	})
	t.Run("a stale save whose answer was lost is not judged", func(t *testing.T) {
		r := takeover()
		r.complete(1, "a", resp, 200, 0, false, true)
		want(t, r, check.Fencing, check.Pass, "")
	})
	// A save or release from a token no claim of the key handed out
	// (abuse's forged ones), accepted: fencing passed, saying "all from
	// the current token", beside 548 forged saves accepted.
	t.Run("a forged token's save accepted fails", func(t *testing.T) {
		r := takeover()
		r.complete(2, "made-up", resp, 200, 201, false, false)
		want(t, r, check.Fencing, check.Fail, "no claim of")
	})
	t.Run("an empty token's release accepted fails", func(t *testing.T) {
		r := takeover()
		r.release(2, "", 200, 201, false)
		want(t, r, check.Fencing, check.Fail, "with token (empty)")
	})
	t.Run("a forged token's save fenced passes", func(t *testing.T) {
		r := takeover()
		r.complete(2, "made-up", resp, 200, 201, true, false)
		want(t, r, check.Fencing, check.Pass, "")
	})
	t.Run("a token handed out twice fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.release(1, "a", 2, 3, false)
		r.begin(2, "fp", 10, 11, claimedD("a", false))
		want(t, r, check.Fencing, check.Fail, "handed out twice")
	})
}

// TestDeclaredFence: a store that declares a fencing number is held to it:
// the numbers of a key's successive claims strictly increase.
func TestDeclaredFence(t *testing.T) {
	fence := func(tk stores.Token) (uint64, bool) {
		var n uint64
		_, err := fmt.Sscanf(string(tk), "%d:", &n)
		return n, err == nil
	}
	judge := func(r *rec) check.Result {
		for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: time.Second, Fence: fence}) {
			if c.Checker == check.Fencing {
				return c
			}
		}
		return check.Result{}
	}
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("1:a", false))
	r.begin(2, "fp", 150, 151, claimedD("2:b", true))
	if c := judge(r); c.Verdict != check.Pass {
		t.Fatalf("increasing fences: %s", c.Detail)
	}
	r.begin(3, "fp", 300, 301, claimedD("2:c", true)) // a takeover that kept the fence
	if c := judge(r); c.Verdict != check.Fail || !strings.Contains(c.Detail, "do not increase") {
		t.Fatalf("a repeated fence: %s %s", c.Verdict, c.Detail)
	}
	r = newRec()
	r.begin(1, "fp", 0, 1, claimedD("opaque", false))
	if c := judge(r); c.Verdict != check.Fail || !strings.Contains(c.Detail, "no fencing number") {
		t.Fatalf("a token without a number: %s %s", c.Verdict, c.Detail)
	}
}

// fencing is the fencing checker's verdict on r under model m, with the
// declared fence (nil: none).
func fencing(t *testing.T, r *rec, m models.Config, fence stores.Fence) check.Result {
	t.Helper()
	for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: m, ProbeClient: probe, LinTimeout: time.Second, Fence: fence}) {
		if c.Checker == check.Fencing {
			return c
		}
	}
	t.Fatal("no fencing result")
	return check.Result{}
}

// fencedD is a claim that gives its fencing number as a field.
func fencedD(tok string, n uint64, takeover bool) stores.Decision {
	d := claimedD(tok, takeover)
	d.Fence = n
	return d
}

// TestFencesAsFields: numbers a store gives as stores.Decision.Fence are
// judged with no Fence func: increasing passes, a repeat fails, and so
// does a claim without one in a run whose store gives them.
func TestFencesAsFields(t *testing.T) {
	r := newRec()
	r.begin(1, "fp", 0, 1, fencedD("a", 1, false))
	r.begin(2, "fp", 150, 151, fencedD("b", 2, true))
	if c := fencing(t, r, model, nil); c.Verdict != check.Pass || !strings.Contains(c.Detail, "fencing numbers of 2 claims increase") {
		t.Fatalf("increasing fields: %s %s", c.Verdict, c.Detail)
	}
	r.begin(3, "fp", 300, 301, fencedD("c", 2, true))
	if c := fencing(t, r, model, nil); c.Verdict != check.Fail || !strings.Contains(c.Detail, "client 2 claimed with 2 (token b)") ||
		!strings.Contains(c.Detail, "then client 3 with 2 (token c)") {
		t.Fatalf("a repeated field: %s %s", c.Verdict, c.Detail)
	}
	r = newRec()
	r.begin(1, "fp", 0, 1, fencedD("a", 1, false))
	r.begin(2, "fp", 150, 151, claimedD("b", true))
	if c := fencing(t, r, model, nil); c.Verdict != check.Fail || !strings.Contains(c.Detail, "no fencing number") {
		t.Fatalf("a claim without its field: %s %s", c.Verdict, c.Detail)
	}
}

// TestFenceRestartsPerLife: a store that declares FenceRestartsPerLife
// may start its numbers again once retention may have removed the key's
// record between two claims (a prune that found it past its retention, or
// its age by then), and only then; undeclared, any restart fails, and the
// failure names the declaration when it would have allowed it.
func TestFenceRestartsPerLife(t *testing.T) {
	perLife := model
	perLife.Semantics.FenceRestartsPerLife = true
	prune := func(r *rec, call int64, now time.Duration) {
		r.op(0, models.Input{Kind: models.Prune, Now: t0.Add(now)}, models.Output{}, call, call+1)
	}
	// A life: a claim and a takeover (numbers 1, 2). A prune called at 5 s
	// by a clock that reads 10.5 s finds the record past its 10 s
	// retention and removes it; a claim then starts at 1.
	restartAfterPrune := func() *rec {
		r := newRec()
		r.begin(1, "fp", 0, 1, fencedD("a", 1, false))
		r.begin(2, "fp", 150, 151, fencedD("b", 2, true))
		prune(r, 5000, 10500*time.Millisecond)
		r.begin(3, "fp", 5100, 5101, fencedD("c", 1, false))
		return r
	}
	t.Run("a restart after a prune passes, declared", func(t *testing.T) {
		if c := fencing(t, restartAfterPrune(), perLife, nil); c.Verdict != check.Pass || !strings.Contains(c.Detail, "within each life") {
			t.Fatalf("%s %s", c.Verdict, c.Detail)
		}
	})
	t.Run("a restart after a prune fails, undeclared, naming the declaration", func(t *testing.T) {
		c := fencing(t, restartAfterPrune(), model, nil)
		if c.Verdict != check.Fail || !strings.Contains(c.Detail, "FenceRestartsPerLife: true") || !strings.Contains(c.Detail, "client 1 claimed with 1 (token a)") {
			t.Fatalf("%s %s", c.Verdict, c.Detail)
		}
	})
	t.Run("a restart past the retention with no prune passes, declared", func(t *testing.T) {
		r := newRec() // a store that lets records expire by themselves (a TTL)
		r.begin(1, "fp", 0, 1, fencedD("a", 1, false))
		r.begin(2, "fp", 10100, 10101, fencedD("b", 1, false))
		if c := fencing(t, r, perLife, nil); c.Verdict != check.Pass {
			t.Fatalf("%s %s", c.Verdict, c.Detail)
		}
	})
	t.Run("a restart without a prune, inside the retention, fails declared", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, fencedD("a", 1, false))
		r.begin(2, "fp", 150, 151, fencedD("b", 2, true))
		r.release(2, "b", 200, 201, false) // a release does not end the life
		r.begin(3, "fp", 300, 301, fencedD("c", 1, false))
		if c := fencing(t, r, perLife, nil); c.Verdict != check.Fail || !strings.Contains(c.Detail, "cannot have removed its record") {
			t.Fatalf("%s %s", c.Verdict, c.Detail)
		}
	})
	t.Run("a prune too early for the record does not count", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, fencedD("a", 1, false))
		r.begin(2, "fp", 150, 151, fencedD("b", 2, true))
		prune(r, 5000, 5*time.Second) // the record is 5 s old by the prune's clock
		r.begin(3, "fp", 5100, 5101, fencedD("c", 1, true))
		if c := fencing(t, r, perLife, nil); c.Verdict != check.Fail {
			t.Fatalf("%s %s", c.Verdict, c.Detail)
		}
	})
	t.Run("a restart inside the next life fails: its prune came before both claims", func(t *testing.T) {
		r := restartAfterPrune()
		r.begin(4, "fp", 5300, 5301, fencedD("d", 2, true))
		if c := fencing(t, r, perLife, nil); c.Verdict != check.Pass {
			t.Fatalf("the next life's takeover: %s %s", c.Verdict, c.Detail)
		}
		r.begin(5, "fp", 5500, 5501, fencedD("e", 1, true))
		c := fencing(t, r, perLife, nil)
		if c.Verdict != check.Fail || !strings.Contains(c.Detail, "client 3 claimed with 1 (token c)") || !strings.Contains(c.Detail, "then client 5 with 1 (token e)") {
			t.Fatalf("%s %s", c.Verdict, c.Detail)
		}
	})
}
