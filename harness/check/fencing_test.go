package check_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
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
		want(t, r, check.Fencing, check.Pass, "")
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
