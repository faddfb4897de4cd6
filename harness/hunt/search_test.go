package hunt_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/sched"
	"github.com/idemcheck/idemcheck/internal/rapidrec"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// staleWriteLanded finds, in a history, a save or release accepted from a
// client whose claim was no longer the latest: another client claimed the
// key after it. A correct store fences every such write.
func staleWriteLanded(h *history.History) (string, bool) {
	ops := h.Ops()
	for _, w := range ops {
		if (w.Input.Kind != models.Complete && w.Input.Kind != models.Release) || w.Output.Fenced || w.Output.Unknown {
			continue
		}
		var last *history.Op
		for i, c := range ops {
			if c.Input.Kind == models.Begin && !c.Output.Unknown && c.Output.Decision.Outcome == stores.Claimed && c.Return < w.Call {
				last = &ops[i]
			}
		}
		if last != nil && last.Client != w.Client {
			return fmt.Sprintf("%s by client %d (token %s) landed, though client %d had claimed since (token %s)",
				w.Input.Kind, w.Client, w.Input.Token, last.Client, last.Output.Decision.Token), true
		}
	}
	return "", false
}

// setFlag sets a rapid flag for the test and puts it back after.
func setFlag(t *testing.T, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag %s", name)
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// TestSearchFindsTheTokenReuseCounterexample: rapid steers the scheduler
// (interleaving, clock ticks, which clocks lag, whose work fails) through
// the sched-takeover episode on the card's token (locked_at in ms), and
// must find docs/DESIGN.md §1's counterexample by itself: a token comes back to
// a new claimant and the old owner's fenced save lands. Nothing in the
// episode names that schedule; rapid then shrinks it. The correct store,
// searched the same way, never lets a stale write land.
func TestSearchFindsTheTokenReuseCounterexample(t *testing.T) {
	setFlag(t, "rapid.nofailfile", "true")
	setFlag(t, "rapid.checks", "5000")
	o := harnesstest.Options(t, "memory", stores.Correct)
	o.Variant = "token-reuse"
	eps, err := hunt.NewEpisodes(context.Background(), o, "sched-takeover")
	if err != nil {
		t.Fatal(err)
	}
	defer eps.Close()
	var last *hunt.Episode
	var found string
	runs := 0
	failed, _ := rapidrec.Check(t.Name(), func(rt *rapid.T) {
		runs++
		ep := eps.Run(context.Background(), sched.Rapid{T: rt})
		if what, ok := staleWriteLanded(ep.Hist); ok {
			last, found = ep, what
			rt.Fatal(what)
		}
	})
	if !failed {
		t.Fatalf("rapid found no stale save landing in %d runs on token-reuse", runs)
	}
	// The last failing run is rapid's shrunk counterexample.
	t.Logf("found and shrunk in %d runs: %s", runs, found)
	var claims []string
	for _, e := range last.Log {
		if e.Kind == sched.Statement || e.Kind == sched.Acted || e.Kind == sched.Picked {
			t.Log(e.String())
		}
	}
	for _, op := range last.Hist.Ops() {
		if op.Input.Kind == models.Begin && op.Output.Decision.Outcome == stores.Claimed {
			claims = append(claims, string(op.Output.Decision.Token))
		}
	}
	// The shape of docs/DESIGN.md §1: some token was handed out twice, to
	// different clients, and the write that landed carried it.
	seen := map[string]int{}
	for _, c := range claims {
		seen[c]++
	}
	repeated := false
	for tok, n := range seen {
		if n > 1 && strings.Contains(found, "token "+tok) {
			repeated = true
		}
	}
	if !repeated {
		t.Errorf("the landing write's token was not handed out twice: claims %v; %s", claims, found)
	}

	o.Variant = stores.Correct
	good, err := hunt.NewEpisodes(context.Background(), o, "sched-takeover")
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	setFlag(t, "rapid.checks", "500")
	rapid.Check(t, func(rt *rapid.T) {
		ep := good.Run(context.Background(), sched.Rapid{T: rt})
		if what, ok := staleWriteLanded(ep.Hist); ok {
			rt.Fatalf("correct store: %s", what)
		}
		for _, c := range ep.Checks {
			if c.Verdict == check.Fail {
				rt.Fatalf("correct store: %s: %s", c.Checker, c.Detail)
			}
		}
	})
}
