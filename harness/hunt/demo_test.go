package hunt_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/stores"
)

// TestDemoRerunsASpoiledCorrectRun: on a server-clock store a LockTTL
// of a millisecond is shorter than the scheduler's switch from one
// client to the next, so the correct store's run of select-then-insert's
// schedule sees the parked owner's claim go stale and taken over (the
// lease working, on a machine slower than the lease). The demo must not
// show that as the correct store's harm: it runs the correct store again
// at ten times the LockTTL and Retention, says so in its verdict, and the
// run it shows charged the order once.
func TestDemoRerunsASpoiledCorrectRun(t *testing.T) {
	o := harnesstest.Options(t, "redis", stores.Correct)
	o.ScheduledLockTTL = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A switch between clients may, rarely, be quicker than the
	// millisecond: a few tries until the first correct run is spoiled.
	for try := 1; try <= 5; try++ {
		info, bad, good, err := hunt.Demo(ctx, o, "select-then-insert")
		if err != nil {
			t.Fatal(err)
		}
		if len(bad.Caught) == 0 {
			t.Errorf("try %d: the mutant's run was not caught: %s", try, bad.Harm)
		}
		// No run of several statements on a server fits in a 1 ms
		// lease: the stretch between the script's ticks is measured.
		if !strings.Contains(bad.Outran, "past the LockTTL of 1ms") {
			t.Errorf("try %d: the mutant's run at a 1ms LockTTL does not say the machine outran it: %q", try, bad.Outran)
		}
		if info.CorrectRerun == "" {
			if good.Spoiled() {
				t.Fatalf("try %d: the correct run was spoiled (%s, caught by %v) and not run again", try, good.Harm, good.Caught)
			}
			t.Logf("try %d: the first correct run was not spoiled at a 1ms LockTTL; again", try)
			continue
		}
		// Its Retention grows with its LockTTL, so that its ticks stay
		// inside the retention (at ten times a 2 s LockTTL a tick
		// outlasted the default 10 s, and short-retention's rerun
		// rightly lost its record and charged again).
		if want := fmt.Sprintf("ran again at LockTTL 10ms (Retention %s)", o.Retention*10); !strings.Contains(info.CorrectRerun, want) {
			t.Errorf("the rerun's note does not say %q: %s", want, info.CorrectRerun)
		}
		if v := hunt.Verdict(info, bad, good); !strings.Contains(v, info.CorrectRerun) {
			t.Errorf("the verdict does not say the correct run was run again: %s", v)
		}
		// At 10 ms a loaded machine may spoil the rerun too; then the
		// demo says so (the CLI exits 3), which is what Spoiled tells.
		if good.Spoiled() {
			t.Logf("the rerun at 10ms was spoiled too (%s): the CLI would exit 3", good.Harm)
			// A stall past 10 ms of a lease by the server's clock is what
			// spoils a correct run; it is measured and said.
			if good.Outran == "" {
				t.Errorf("the spoiled rerun does not say the machine outran its LockTTL: %s", good.Harm)
			}
		} else if good.Charges != 1 {
			t.Errorf("the rerun charged the order %d times: %s", good.Charges, good.Harm)
		}
		return
	}
	t.Fatal("in five tries, no correct run at a 1ms LockTTL was spoiled: the test proves nothing")
}

// TestDemoHuntsWhatItsScriptMisses: a store's own variant of a scripted
// mutant may be another version of the bug, which the script does not
// reach (an exec store's unfenced release that still checks the status
// deleted nothing after the new owner's save): the demo hunts it, and
// says why, where it said "no harm" of a bug check fails. Here the store
// named unfenced-release takes stale saves instead (the memory store's
// unfenced-complete), which the script's stale release never shows.
func TestDemoHuntsWhatItsScriptMisses(t *testing.T) {
	mem, err := stores.Lookup("memory")
	if err != nil {
		t.Fatal(err)
	}
	alt := mem
	alt.Name, alt.Mutants = "demo-alt", []string{"unfenced-release"}
	alt.Open = func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
		if cfg.Variant == "unfenced-release" {
			cfg.Variant = "unfenced-complete"
		}
		return mem.Open(ctx, addr, cfg)
	}
	o := harnesstest.Options(t, "memory", stores.Correct)
	o.Backend = alt
	info, bad, _, err := hunt.Demo(context.Background(), o, "unfenced-release")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Found || !strings.Contains(info.Unscripted, "the scripted interleaving showed no harm") || len(bad.Caught) == 0 {
		t.Fatalf("found %v, %q, caught by %v: %s", info.Found, info.Unscripted, bad.Caught, bad.Harm)
	}
}

// TestOrderNamedKillsShowTheirCalls: a kill named by its order, not a
// key (top-hop-only's charge of one order twice), shows every call of
// the order in its trace, and its demo counts the order's charges: the
// trace held the prunes alone, and the found demo said 0 charges beside
// a harm of two.
func TestOrderNamedKillsShowTheirCalls(t *testing.T) {
	o := harnesstest.Options(t, "memory", stores.Correct)
	k, err := hunt.Hunt(context.Background(), o, "top-hop-only", hunt.Options{Budget: time.Minute, Keys: 2})
	if err != nil || !k.Killed {
		t.Fatalf("top-hop-only: %v, %+v", err, k)
	}
	if !slices.ContainsFunc(k.Trace, func(l string) bool { return strings.Contains(l, "Begin(") }) ||
		!slices.ContainsFunc(k.Trace, func(l string) bool { return strings.Contains(l, "work for order") }) {
		t.Errorf("the shortest trace of an order charged twice shows no call of it:\n%s", strings.Join(k.Trace, "\n"))
	}
	_, bad, _, err := hunt.Demo(context.Background(), o, "top-hop-only")
	if err != nil {
		t.Fatal(err)
	}
	if bad.Charges < 2 || len(bad.ChargeIDs) != bad.Charges {
		t.Errorf("the demo's run counts %d charges (%v) beside %s", bad.Charges, bad.ChargeIDs, bad.Harm)
	}
}
