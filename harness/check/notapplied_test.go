package check_test

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/models"
)

// beginNotApplied records a Begin the store declared not applied
// (stores.ErrNotApplied).
func (r *rec) beginNotApplied(client int, fp string, call, ret int64) {
	r.op(client, models.Input{Kind: models.Begin, Fingerprint: fp}, models.Output{NotApplied: true}, call, ret)
}

// TestNotApplied: a call the store declared not applied is a definite
// no-op: not an unknown outcome that may have claimed, not a save, not a
// reuse to judge; and a store whose no-op did take effect fails.
func TestNotApplied(t *testing.T) {
	t.Run("a healthy history with declared no-ops passes every checker", func(t *testing.T) {
		r := happy()
		r.beginNotApplied(3, "fp", 2, 4)
		r.beginNotApplied(4, "other", 7, 8) // other parameters: no 422 owed, none given
		r.op(1, models.Input{Kind: models.Complete, Token: "a", Response: resp}, models.Output{NotApplied: true}, 4, 5)
		for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: 10 * time.Second}) {
			if c.Verdict != check.Pass {
				t.Errorf("%s: %s: %s", c.Checker, c.Verdict, c.Detail)
			}
		}
	})
	t.Run("a 409 with only a no-op Begin before it fails (an unknown one would pass)", func(t *testing.T) {
		r := newRec()
		r.beginNotApplied(1, "fp", 0, 1)
		r.begin(2, "fp", 10, 11, inFlightD)
		want(t, r, check.Linearizable, check.Fail, "no order")
	})
	t.Run("a replay of an answer whose save was declared not applied fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.op(1, models.Input{Kind: models.Complete, Token: "a", Response: resp}, models.Output{NotApplied: true}, 5, 6)
		r.begin(2, "fp", 20, 21, replayD(resp))
		want(t, r, check.Replay, check.Fail, "which no Complete had saved")
		want(t, r, check.Linearizable, check.Fail, "no order")
	})
	t.Run("a release declared not applied leaves the claim: a fresh claim after it fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.op(1, models.Input{Kind: models.Release, Token: "a"}, models.Output{NotApplied: true}, 2, 3)
		r.begin(2, "fp", 10, 11, claimedD("b", false))
		want(t, r, check.Linearizable, check.Fail, "no order")
	})
	t.Run("a no-op beside an unknown Begin: a fresh claim after both passes", func(t *testing.T) {
		r := newRec()
		r.beginNotApplied(1, "fp", 0, 1)
		r.beginUnknown(2, "fp", 2)
		r.begin(probe, "fp", 300, 301, claimedD("p", false))
		want(t, r, check.Linearizable, check.Pass, "")
	})
}
