package check_test

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
)

func TestLiveness(t *testing.T) {
	t.Run("a key still in flight at the probe fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(probe, "fp", 50, 51, inFlightD)
		want(t, r, check.Liveness, check.Fail, "still in flight")
	})
	t.Run("an unanswered probe fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.beginUnknown(probe, "fp", 200)
		want(t, r, check.Liveness, check.Fail, "no answer")
	})
	t.Run("a probe answered after an unanswered one passes", func(t *testing.T) {
		// Found by a soak (redis, crash, seed 13): on a loaded machine the
		// probe's first call timed out; the probe asks again after LockTTL.
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.beginUnknown(probe, "fp", 200)
		r.begin(probe, "fp", 3300, 3301, claimedD("p", true))
		want(t, r, check.Liveness, check.Pass, "")
	})
	t.Run("a probe that finds the key in flight after an unanswered one fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.beginUnknown(probe, "fp", 200)
		r.begin(probe, "fp", 3300, 3301, inFlightD)
		want(t, r, check.Liveness, check.Fail, "still in flight")
	})
	t.Run("a probe that takes the stale claim over passes", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(probe, "fp", 200, 201, claimedD("p", true))
		want(t, r, check.Liveness, check.Pass, "")
	})
	t.Run("a key the probe left out is not judged, and the result says so", func(t *testing.T) {
		// A lease longer than the run may wait (harness.Options.ProbeWait):
		// the probe's own answer was lost, and the key, in flight after
		// it, was left out rather than waited for.
		r := newRec()
		r.unprobed = map[string]bool{key.String(): true}
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.beginUnknown(probe, "fp", 200)
		r.begin(probe, "fp", 300, 301, inFlightD)
		got := r.judge(t, check.Liveness)
		if got.Verdict != check.Unknown || !strings.Contains(got.Detail, "1 key(s) not probed") {
			t.Fatalf("liveness %s (%s), want unknown, saying a key was not probed", got.Verdict, got.Detail)
		}
	})
	t.Run("no probe is undecided", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		want(t, r, check.Liveness, check.Unknown, "")
	})
}
