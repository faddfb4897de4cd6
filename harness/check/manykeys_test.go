package check_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// manyKeys is a history of n keys, none released or pruned, each of
// which makes the mismatch and replay-fidelity checkers ask whether the
// key may have been reset (emptied by a release or a prune) before one of
// its calls returned: client 1 claims and saves, client 2 reuses the key
// with other parameters (answered 422), client 3 is replayed, and client 4
// claims it while the save is under way (a claim racing the save, the
// one replay-fidelity judges). A check that looked through the whole
// history for each such call took over a minute at 12,000 keys.
func manyKeys(n int) *rec {
	r := newRec()
	for i := range n {
		k := stores.KeyRef{Tenant: "t0", Key: fmt.Sprintf("order-%05d", i)}
		base := int64(i) * 100
		begin := func(client int, fp string, call, ret int64, d stores.Decision) {
			d.DecidedAt = t0.Add(time.Duration(call * ms))
			r.op(client, models.Input{Kind: models.Begin, Key: k, Fingerprint: fp}, models.Output{Decision: d}, call, ret)
		}
		begin(1, "fp", base, base+1, claimedD("a", false))
		r.op(1, models.Input{Kind: models.Complete, Key: k, Token: "a", Response: resp, Now: t0.Add(time.Duration((base + 6) * ms))},
			models.Output{}, base+5, base+6)
		begin(4, "fp", base+5, base+7, claimedD("d", false))
		begin(2, "fp-eur", base+30, base+31, mismatchD)
		begin(3, "fp", base+40, base+41, replayD(resp))
		for _, a := range []struct {
			client int
			at     int64
		}{{1, base + 6}, {3, base + 41}} {
			r.h.AddAnswer(history.Answer{Client: a.client, Key: k, Order: k.Key, Fingerprint: "fp", Response: resp, Status: resp.Status, At: a.at * ms})
		}
	}
	return r
}

// TestMismatchManyKeysIsLinear: the mismatch and replay-fidelity checkers
// judge a history of 12,000 keys (60,000 calls), each key asking whether
// it was reset before its calls, and pass it. It asserts no time: before
// the reset was computed once per key and once per history, it took over
// a minute under -race; now a few seconds.
func TestMismatchManyKeysIsLinear(t *testing.T) {
	const n = 12000
	r := manyKeys(n)
	judged := 0
	for _, got := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: 10 * time.Second}) {
		if got.Checker != check.Mismatch && got.Checker != check.Replay {
			continue
		}
		judged++
		if got.Verdict != check.Pass || got.Judged != n {
			t.Errorf("%s: %s judged %d (%s), want a pass judging %d", got.Checker, got.Verdict, got.Judged, got.Detail, n)
		}
	}
	if judged != 2 {
		t.Fatalf("%d of the mismatch and replay-fidelity results, want both", judged)
	}
}
