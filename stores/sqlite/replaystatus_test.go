package sqlite

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// TestReplayedStatusComesBackWhole: the replay read packs the saved
// status above its judged bits (readAnswer); every status a caller may
// save, negative and far past HTTP's too, is replayed as saved, and the
// judgement beside it (a replay, a 422 on another fingerprint) holds.
func TestReplayedStatusComesBackWhole(t *testing.T) {
	s := open(t, stores.Correct)
	ctx := context.Background()
	now := time.Now()
	for _, status := range []int{0, 1, 200, 599, -1, -7, -8, -9, 1 << 40, -(1 << 40), math.MaxInt64 >> 4, math.MinInt64 >> 4} {
		k := key("status-" + time.Duration(status).String())
		tok := mustClaim(t, s, req(k, "fp", now), false)
		if err := s.Complete(ctx, k, tok, stores.Response{Status: status, Body: "b"}); err != nil {
			t.Fatal(err)
		}
		d := begin(t, s, req(k, "fp", now))
		if d.Outcome != stores.Replay || d.Response.Status != status || d.Response.Body != "b" {
			t.Errorf("status %d: replayed %v %+v", status, d.Outcome, d.Response)
		}
		wantOutcome(t, begin(t, s, req(k, "other", now)), stores.Mismatch)
	}
}
