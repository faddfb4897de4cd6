package check_test

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

func TestReplay(t *testing.T) {
	t.Run("answers of two lives recorded out of order pass", func(t *testing.T) {
		// Found by soak --random-flags (memory, takeover, 6,240 keys, 3
		// clients): the first life's answer was recorded after the second
		// life's, whose claim came after a prune emptied the key.
		resp2 := stores.Response{Status: 201, Body: "charged ch_2"}
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.complete(1, "a", resp, 5, 6, false, false)
		r.op(0, models.Input{Kind: models.Prune, Key: stores.KeyRef{}, Now: t0.Add(30 * time.Millisecond)}, models.Output{}, 30, 31)
		r.begin(3, "fp", 40, 41, claimedD("c", false))
		r.complete(3, "c", resp2, 45, 46, false, false)
		r.answer(3, "fp", resp2, 46)
		r.answer(1, "fp", resp, 6) // recorded last, given first
		got := r.judge(t, check.Replay)
		if got.Verdict != check.Pass {
			t.Fatalf("%s: %s", got.Verdict, got.Detail)
		}
	})
	t.Run("a replay of nothing saved fails", func(t *testing.T) {
		r := happy()
		r.begin(3, "fp", 30, 31, replayD(stores.Response{Status: 201, Body: "charged ch_9"}))
		want(t, r, check.Replay, check.Fail, "which no Complete had saved")
	})
	t.Run("a replay before the save fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(2, "fp", 2, 3, replayD(resp))
		r.complete(1, "a", resp, 5, 6, false, false)
		want(t, r, check.Replay, check.Fail, "which no Complete had saved")
	})
	t.Run("two clients told different answers fail", func(t *testing.T) {
		r := happy()
		r.answer(3, "fp", stores.Response{Status: 500, Body: "error"}, 40)
		want(t, r, check.Replay, check.Fail, "different answers")
	})
	t.Run("the probe's answer is not compared", func(t *testing.T) {
		r := happy()
		r.answer(probe, "fp", stores.Response{}, 400)
		want(t, r, check.Replay, check.Pass, "")
	})
	// A late retry after the key's retention: the record is gone, the
	// retry claims the key afresh and saves its own answer (a false alarm
	// on the correct Postgres store in chaos, on a loaded machine).
	later := func(at int64) *rec {
		r := happy()
		other := stores.Response{Status: 201, Body: "charged ch_2"}
		r.begin(3, "fp", at, at+1, claimedD("c", false))
		r.complete(3, "c", other, at+5, at+6, false, false)
		r.answer(3, "fp", other, at+6)
		return r
	}
	t.Run("a new life of the key after its retention may answer anew", func(t *testing.T) {
		r := later(model.Retention.Milliseconds() + 500)
		want(t, r, check.Replay, check.Pass, "")
		want(t, r, check.AtMostOnce, check.Pass, "")
	})
	t.Run("a new life after a save whose answer was lost, known done by a replay", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.complete(1, "a", resp, 5, 0, false, true) // the worker died: unknown, yet it landed
		r.begin(2, "fp", 20, 21, replayD(resp))
		r.answer(2, "fp", resp, 21)
		other := stores.Response{Status: 201, Body: "charged ch_2"}
		at := model.Retention.Milliseconds() + 500
		r.begin(3, "fp", at, at+1, claimedD("c", false))
		r.complete(3, "c", other, at+5, at+6, false, false)
		r.answer(3, "fp", other, at+6)
		want(t, r, check.Replay, check.Pass, "")
	})
	// twoOwners: client 1 claims at 0 ms and saves at 5 ms; client 2's
	// claim is sent at 2 ms and answered at ret (a takeover or not), and it
	// saves its own answer after; prune, if set, runs just before ret.
	twoOwners := func(ret int64, takeover, prune bool) *rec {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(2, "fp", 2, ret, claimedD("b", takeover))
		r.complete(1, "a", resp, 5, 6, false, false)
		r.answer(1, "fp", resp, 6)
		if prune {
			r.op(9, models.Input{Kind: models.Prune, Now: t0.Add(time.Duration(ret-10) * time.Millisecond)}, models.Output{}, ret-10, ret-5)
		}
		other := stores.Response{Status: 201, Body: "charged ch_1 (owner b)"}
		r.complete(2, "b", other, ret+5, ret+6, false, false)
		r.answer(2, "fp", other, ret+6)
		return r
	}
	t.Run("a claim sent before the save and decided after it, past a prune, starts a new life", func(t *testing.T) {
		// A Begin that waited 20 s on a loaded Postgres (soak, takeover):
		// sent before the owner saved, decided after a prune emptied the
		// key, so it claimed afresh and saved its own answer.
		r := twoOwners(model.Retention.Milliseconds()+500, false, true)
		want(t, r, check.Replay, check.Pass, "")
		want(t, r, check.Linearizable, check.Pass, "")
		want(t, r, check.AtMostOnce, check.Pass, "")
	})
	t.Run("a claim racing the save with nothing to empty the key shares its life", func(t *testing.T) {
		// select-then-insert's second claim: sent before the owner saved,
		// answered after, no release or prune between: one life, two answers.
		want(t, twoOwners(9, false, false), check.Replay, check.Fail, "different answers")
	})
	t.Run("a claim that returned before the save was sent shares its life", func(t *testing.T) {
		want(t, twoOwners(4, true, false), check.Replay, check.Fail, "different answers")
	})
	t.Run("a new life inside the retention is at-most-once's violation, not reported twice", func(t *testing.T) {
		r := later(500)
		want(t, r, check.AtMostOnce, check.Fail, "claimed again")
		want(t, r, check.Replay, check.Pass, "")
	})
}
