package check_test

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
)

func TestMismatchTakeover(t *testing.T) {
	t.Run("a takeover by other parameters while the first claim's call is still open fails", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 50, claimedD("a", false))     // its commit waits
		r.begin(2, "fp-eur", 10, 20, claimedD("b", true)) // takes that claim over
		want(t, r, check.Mismatch, check.Fail, "compared no fingerprint")
	})
	t.Run("a takeover by the same parameters passes", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(2, "fp", 300, 301, claimedD("b", true))
		want(t, r, check.Mismatch, check.Pass, "")
	})
	t.Run("a takeover that may have taken over its own earlier unanswered try passes", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.beginUnknown(2, "fp-eur", 5) // may have claimed after a reset
		r.begin(2, "fp-eur", 300, 301, claimedD("b", true))
		got := r.judge(t, check.Mismatch)
		for _, v := range got.Violations {
			if strings.Contains(v.Detail, "compared no fingerprint") {
				t.Fatalf("flagged a takeover that may have taken over its own claim: %s", v.Detail)
			}
		}
	})
}

func TestMismatch(t *testing.T) {
	t.Run("other parameters answered 422 pass", func(t *testing.T) {
		r := happy()
		r.begin(3, "fp-eur", 30, 31, mismatchD)
		want(t, r, check.Mismatch, check.Pass, "")
	})
	t.Run("other parameters replayed fail", func(t *testing.T) {
		r := happy()
		r.begin(3, "fp-eur", 30, 31, replayD(resp))
		want(t, r, check.Mismatch, check.Fail, "instead of 422")
	})
	t.Run("a 422 to a key's own parameters is spurious", func(t *testing.T) {
		r := newRec()
		r.begin(3, "fp", 0, 1, mismatchD) // nothing with other parameters ever claimed it
		want(t, r, check.Mismatch, check.Fail, "spurious mismatch")
	})
	t.Run("a 422 after an unanswered claim with other parameters is allowed", func(t *testing.T) {
		r := newRec()
		r.beginUnknown(1, "fp-eur", 0)
		r.begin(3, "fp", 10, 11, mismatchD)
		want(t, r, check.Mismatch, check.Pass, "")
	})
	t.Run("other parameters after a release claim afresh", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.release(1, "a", 5, 6, false)
		r.begin(3, "fp-eur", 30, 31, claimedD("c", false))
		want(t, r, check.Mismatch, check.Pass, "")
	})
	t.Run("other parameters claim afresh beside a release that overlaps the Begin", func(t *testing.T) {
		// The Begin is called (and waits for the write lock) before the
		// release is called; the release commits first: a legal order.
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(3, "fp-eur", 2, 30, claimedD("c", false))
		r.release(1, "a", 5, 20, false)
		want(t, r, check.Mismatch, check.Pass, "")
	})
	t.Run("other parameters claim afresh once the retention may have run out", func(t *testing.T) {
		// A store that expires keys itself (Redis) needs no prune: a
		// Begin decided past the retention may find the key gone.
		r := happy()
		past := model.Retention.Milliseconds() + 5
		r.begin(3, "fp-eur", past, past+1, claimedD("c", false))
		want(t, r, check.Mismatch, check.Pass, "")
	})
	t.Run("other parameters claimed inside the retention fail, however late", func(t *testing.T) {
		r := happy()
		inside := model.Retention.Milliseconds() - 50
		r.begin(3, "fp-eur", inside, inside+1, claimedD("c", false))
		want(t, r, check.Mismatch, check.Fail, "instead of 422")
	})
	t.Run("other parameters claimed before any release fail", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(3, "fp-eur", 2, 4, claimedD("c", false))
		r.release(1, "a", 5, 20, false)
		want(t, r, check.Mismatch, check.Fail, "instead of 422")
	})
}
