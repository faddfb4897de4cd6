package check_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// lossyRace records a race on a correct store (stores/memory, deciding
// by the caller's clock) through a link that loses one call in lose:
// clients clients per key, on keys keys, each retrying its order until it
// is answered (a claim, then its save; or a replay). A lost call is lost
// on its way (it never reached the store) or its answer is (it took
// effect), one or the other at random, and is recorded unknown, as the
// Recorder records a timeout. Each call takes effect at one moment of its
// call and, when answered, returns within 2 ms; clients back off 5 to 25
// ms, and a claim's lease is the model's LockTTL (100 ms).
func lossyRace(seed uint64, keys, clients, lose int) *rec {
	rng := rand.New(rand.NewPCG(seed, 1))
	st, err := memory.New(stores.Config{LockTTL: model.LockTTL, Retention: model.Retention})
	if err != nil {
		panic(err)
	}
	r := newRec()
	ctx := context.Background()
	type client struct {
		key   stores.KeyRef
		token stores.Token // the claim to save, when it has one
		next  int64        // when it calls next (ns)
		done  bool
	}
	var cs []*client
	for k := range keys {
		for range clients {
			cs = append(cs, &client{key: stores.KeyRef{Tenant: "t0", Key: fmt.Sprintf("order-%d", k)}, next: int64(rng.IntN(5)) * ms})
		}
	}
	record := func(id int, in models.Input, out models.Output, at int64) {
		r.id++
		in.ID = r.id
		op := history.Op{Client: id, Input: in, Output: out, Call: at - rng.Int64N(2*ms), Return: at + rng.Int64N(2*ms)}
		if out.Unknown {
			op.Return = history.Never
		}
		r.h.AddOp(op)
	}
	for left := len(cs); left > 0; {
		// The client due first calls: calls take effect in time order.
		var c *client
		id := 0
		for i, x := range cs {
			if !x.done && (c == nil || x.next < c.next) {
				c, id = x, i
			}
		}
		at := c.next
		now := t0.Add(time.Duration(at))
		lost := rng.IntN(lose) == 0
		reaches := !lost || rng.IntN(2) == 0
		c.next = at + int64(5+rng.IntN(20))*ms
		if c.token != "" {
			in := models.Input{Kind: models.Complete, Key: c.key, Token: c.token, Response: resp, Now: now}
			err := error(nil)
			if reaches {
				err = st.Complete(ctx, c.key, c.token, resp)
			}
			record(id, in, models.Output{Unknown: lost, Fenced: !lost && err != nil}, at)
			c.token = ""
			if !lost {
				c.done = true
				left--
			}
			continue
		}
		in := models.Input{Kind: models.Begin, Key: c.key, Fingerprint: "fp", Now: now}
		var d stores.Decision
		if reaches {
			d, _ = st.Begin(ctx, stores.Request{KeyRef: c.key, Fingerprint: "fp", Now: now})
		}
		if lost {
			record(id, in, models.Output{Unknown: true}, at)
			continue
		}
		record(id, in, models.Output{Decision: d}, at)
		switch d.Outcome {
		case stores.Claimed:
			c.token, c.next = d.Token, at+3*ms
		case stores.Replay:
			c.done = true
			left--
		}
	}
	return r
}

// linVerdict is the linearizability checker's result on r, with a budget
// of a minute.
func linVerdict(r *rec) check.Result {
	for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: time.Minute}) {
		if c.Checker == check.Linearizable {
			return c
		}
	}
	return check.Result{}
}

// TestLossyRace: races on a correct store through a link that loses one
// call in five are linearizable, and the checker decides so.
func TestLossyRace(t *testing.T) {
	for seed := range uint64(3) {
		r := lossyRace(seed, 4, 8, 5)
		unknown := 0
		for _, op := range r.h.Ops() {
			if op.Output.Unknown {
				unknown++
			}
		}
		if got := linVerdict(r); got.Verdict != check.Pass || unknown == 0 {
			t.Errorf("seed %d (%d calls, %d unanswered): %s: %s", seed, len(r.h.Ops()), unknown, got.Verdict, got.Detail)
		}
	}
}

// BenchmarkLossyRace checks twenty lossy races (lossyRace: 4 keys of 8
// clients each) per iteration, at one call lost in five (the issue's
// lossy link) and one in two (a history full of errors), and reports how
// many of the twenty the checker decided.
func BenchmarkLossyRace(b *testing.B) {
	for _, lose := range []int{5, 2} {
		b.Run(fmt.Sprintf("one-in-%d", lose), func(b *testing.B) {
			var races []*rec
			for seed := range uint64(20) {
				races = append(races, lossyRace(seed, 4, 8, lose))
			}
			decided := 0
			for b.Loop() {
				decided = 0
				for _, r := range races {
					if v := linVerdict(r).Verdict; v != check.Unknown {
						decided++
					}
				}
			}
			b.ReportMetric(float64(decided), "decided/20")
		})
	}
}

// BenchmarkFullOfErrors checks one history full of errors: 40 keys of 16
// clients each through a link that loses one call in two (lossyRace).
func BenchmarkFullOfErrors(b *testing.B) {
	r := lossyRace(7, 40, 16, 2)
	for b.Loop() {
		if v := linVerdict(r); v.Verdict != check.Pass {
			b.Fatalf("%s: %s", v.Verdict, v.Detail)
		}
	}
	b.ReportMetric(float64(len(r.h.Ops())), "calls")
}
