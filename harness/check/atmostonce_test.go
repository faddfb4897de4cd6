package check_test

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

func TestAtMostOnce(t *testing.T) {
	t.Run("two charges of one order fail", func(t *testing.T) {
		r := happy()
		r.l.Charge("o000", "", 2, 30*ms) // unkeyed: a second effective charge
		want(t, r, check.AtMostOnce, check.Fail, "charged 2 times")
	})
	t.Run("a keyed retry is deduplicated by the provider and passes", func(t *testing.T) {
		r := happy()
		r.l.Charge("o000", "charge:o000", 2, 30*ms)
		want(t, r, check.AtMostOnce, check.Pass, "")
	})
	t.Run("a key claimed again after it was saved done fails", func(t *testing.T) {
		r := happy()
		r.begin(3, "fp", 40, 41, claimedD("c", false))
		want(t, r, check.AtMostOnce, check.Fail, "claimed again")
	})
	t.Run("a claim sent inside the retention window but answered after it passes", func(t *testing.T) {
		// The Begin waited (a loaded machine): the server may have
		// decided it once the key had expired.
		r := happy()
		r.begin(3, "fp", 9000, 10500, claimedD("c", false))
		want(t, r, check.AtMostOnce, check.Pass, "")
	})
	t.Run("a claim decided past the retention by the store's clock passes", func(t *testing.T) {
		// Found with --lock-ttl 1s and --keys 20 on sqlite: a scheduled
		// episode's manual clock moves a LockTTL a tick, so by the clock
		// the caller-clock store is given the key was past its 10 s
		// retention when the final probe claimed it, 150 ms after its
		// save by the history's clock.
		r := happy()
		d := claimedD("c", false)
		r.op(3, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0.Add(12 * time.Second)},
			models.Output{Decision: stores.Decision{Outcome: d.Outcome, Token: d.Token, DecidedAt: t0.Add(12 * time.Second)}}, 150, 151)
		want(t, r, check.AtMostOnce, check.Pass, "")
		// Inside the retention by both clocks, it is the work running
		// twice.
		r = happy()
		r.op(3, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0.Add(5 * time.Second)},
			models.Output{Decision: stores.Decision{Outcome: d.Outcome, Token: d.Token, DecidedAt: t0.Add(5 * time.Second)}}, 150, 151)
		want(t, r, check.AtMostOnce, check.Fail, "claimed again")
	})
	t.Run("a record a prune removed by its own time, stamped long before it was sent, passes", func(t *testing.T) {
		// Found by soak --random-flags (memory, takeover, 6,240 keys, 3
		// clients, a CPU hog): a client stamped its claim at 3.5 s and
		// sent it at 7.6 s; a prune at 13.5 s rightly removed a record
		// that old; a retry stamped at 13 s (before the prune, sent after it)
		// claimed the key afresh.
		stale := func(prune bool) *rec {
			r := newRec()
			at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
			d := claimedD("a", false)
			d.DecidedAt = at(3500)
			r.op(1, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: at(3500)}, models.Output{Decision: d}, 7621, 7626)
			r.work(1, "a", 9442, 14496)
			r.complete(1, "a", resp, 14496, 14497, false, false)
			if prune {
				r.op(0, models.Input{Kind: models.Prune, Key: stores.KeyRef{}, Now: at(13500)}, models.Output{}, 14544, 14545)
			}
			d2 := claimedD("c", false)
			d2.DecidedAt = at(13000)
			r.op(3, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: at(13000)}, models.Output{Decision: d2}, 15324, 15325)
			return r
		}
		want(t, stale(true), check.AtMostOnce, check.Pass, "")
		// Without a prune between, nothing removed it: the work ran twice.
		want(t, stale(false), check.AtMostOnce, check.Fail, "claimed again")
	})
	t.Run("a claim answered inside the retention window fails", func(t *testing.T) {
		r := happy()
		r.begin(3, "fp", 9000, 9500, claimedD("c", false))
		want(t, r, check.AtMostOnce, check.Fail, "claimed again")
	})
	t.Run("a claim past the retention of a lost first claim passes", func(t *testing.T) {
		// Found by a soak (redis, chaos, seed 21): the first Begin's answer
		// was lost but it claimed on the server, so the key expired
		// Retention after it, before the known takeover's save was 10 s old.
		r := newRec()
		r.beginUnknown(1, "fp", 0)
		r.begin(2, "fp", 9000, 9001, claimedD("a", true))
		r.complete(2, "a", resp, 9002, 9003, false, false)
		r.begin(3, "fp", 10500, 10501, claimedD("b", false))
		want(t, r, check.AtMostOnce, check.Pass, "")
		r = newRec()
		r.begin(2, "fp", 9000, 9001, claimedD("a", false))
		r.complete(2, "a", resp, 9002, 9003, false, false)
		r.begin(3, "fp", 10500, 10501, claimedD("b", false))
		want(t, r, check.AtMostOnce, check.Fail, "claimed again")
	})
	t.Run("after a save whose answer was lost, a takeover passes", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.complete(1, "a", resp, 5, 0, false, true) // unknown: it may not have landed
		r.begin(2, "fp", 200, 201, claimedD("b", true))
		want(t, r, check.AtMostOnce, check.Pass, "")
	})
}
