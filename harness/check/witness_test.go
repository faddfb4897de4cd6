package check_test

import (
	"os"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// beginDecided records a Begin by client at [call, ret] ms, sent at its
// call and decided at decided ms (a server-clock store's answer under
// load: long calls, each decided somewhere inside).
func (r *rec) beginDecided(client int, fp string, call, ret, decided int64, d stores.Decision) {
	d.DecidedAt = t0.Add(time.Duration(decided * ms))
	sent := t0.Add(time.Duration(call * ms))
	r.op(client, models.Input{Kind: models.Begin, Fingerprint: fp, Sent: sent, Now: sent}, models.Output{Decision: d}, call, ret)
}

// inFlightStorm is one key raced by n clients whose Begins were all sent
// at once and answered one by one over two seconds (a server that queued
// them): A claims it, each of the first half is told 409 while A's claim
// is live, B takes the claim over once it is stale (LockTTL 100 ms), the
// second half is told 409 while B's is live, A's late save is fenced, B
// saves, and every client is replayed. late, when positive, makes one
// more 409 decided then, at a time when no claim is live: no order
// allows it.
func inFlightStorm(n int, late int64) *rec {
	r := newRec()
	r.beginDecided(1, "fp", 0, 2, 1, claimedD("a", false))
	for i := range n / 2 {
		r.beginDecided(10+i, "fp", 1, 2400+int64(10*i), 2+int64(i*80/n), inFlightD)
	}
	r.beginDecided(2, "fp", 1, 1100, 150, claimedD("b", true))
	for i := n / 2; i < n; i++ {
		r.beginDecided(10+i, "fp", 1, 2400+int64(10*i), 151+int64((i-n/2)*80/n), inFlightD)
	}
	if late > 0 {
		r.beginDecided(9, "fp", 1, 2100, late, inFlightD)
	}
	r.complete(1, "a", resp, 2200, 2210, true, false)
	r.complete(2, "b", resp, 2300, 2310, false, false)
	for i := range n {
		r.beginDecided(100+i, "fp", 2320+int64(10*i), 2321+int64(10*i), 2320+int64(10*i), replayD(resp))
	}
	r.beginDecided(probe, "fp", 5000, 5001, 5000, replayD(resp))
	return r
}

// TestInFlightStorm: a key with dozens of 409s overlapping two claims,
// open while the key is saved and replayed, passes, and a 409 decided when
// no claim was live still fails it: an order the decision times give is
// taken only when the model accepts every step of it.
func TestInFlightStorm(t *testing.T) {
	want(t, inFlightStorm(60, 0), check.Linearizable, check.Pass, "linearizable")
	want(t, inFlightStorm(6, 400), check.Linearizable, check.Fail, "no order the decision table allows")
}

// BenchmarkRecordedInFlightStorm times the linearizability check of the
// two recorded keys of TestRecordedInFlightStorm.
func BenchmarkRecordedInFlightStorm(b *testing.B) {
	saved, m := recordedStorm(b)
	for b.Loop() {
		for _, sv := range saved {
			for _, c := range check.Run(check.Evidence{Hist: sv.Hist, Ledger: sv.Ledger, Model: m, ProbeClient: 360, LinTimeout: time.Minute}) {
				if c.Checker == check.Linearizable && c.Verdict != check.Pass {
					b.Fatalf("%s: %s", c.Verdict, c.Detail)
				}
			}
		}
	}
}

// TestRecordedInFlightStorm: the recorded calls on one key of two runs of
// a correct Postgres store's race (45 clients, LockTTL 877 ms, the
// machine loaded: Begins waited up to four seconds for a connection), in
// testdata/inflight-storm.jsonl, kept as a regression seed: 144 and 154
// calls, 91 and 101 of them 409s overlapping four claims and three fenced
// saves. Porcupine alone ran out of its 60 s on both (the runs ended
// undecided); the order the store's decision times give settles them.
func TestRecordedInFlightStorm(t *testing.T) {
	saved, m := recordedStorm(t)
	for _, sv := range saved {
		start := time.Now()
		var got check.Result
		for _, c := range check.Run(check.Evidence{Hist: sv.Hist, Ledger: sv.Ledger, Model: m, ProbeClient: 360, LinTimeout: 10 * time.Second}) {
			if c.Checker == check.Linearizable {
				got = c
			}
		}
		if got.Verdict != check.Pass {
			t.Errorf("%s: %s: %s, want a pass", sv.Scenario, got.Verdict, got.Detail)
		}
		t.Logf("%s: %d calls, %s in %v", sv.Scenario, sv.Hist.OpCount(), got.Verdict, time.Since(start))
	}
}

// recordedStorm loads testdata/inflight-storm.jsonl and the model its
// runs were judged by.
func recordedStorm(t testing.TB) ([]history.Saved, models.Config) {
	f, err := os.Open("testdata/inflight-storm.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved, err := history.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return saved, check.ModelFor(stores.ServerClock, stores.Config{LockTTL: 877 * time.Millisecond, Retention: 10 * time.Second}, stores.Semantics{})
}
