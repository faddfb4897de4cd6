// Package historytest generates recorded histories of a given size for
// benchmarks: the checkers' and the report's cost is measured on the same
// history, so that their growth can be compared. It is imported by tests
// only.
package historytest

import (
	"strconv"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// T0 is the wall-clock origin of a generated history.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ProbeClient is the client of a generated history's final liveness
// probe (check.Evidence.ProbeClient).
const ProbeClient = 99

// StormModel is the model configuration a Storm history is correct
// under.
var StormModel = models.Config{LockTTL: 100 * time.Millisecond, Retention: time.Hour}

// Storm records n operations of a retry storm on n/10 keys by 16
// clients, as a correct store answers it: per key a claim, a 409 to a
// concurrent request, the work and its charge, the save, six replays
// and the final probe's; the keys overlap in time (about five at once),
// and a store-wide Prune is called every 10,000 operations.
func Storm(n int) (*history.History, *history.Ledger) {
	h, l := history.New(), history.NewLedger()
	const us = int64(time.Microsecond)
	id := 0
	add := func(client int, k stores.KeyRef, in models.Input, out models.Output, call, ret int64) {
		id++
		in.ID, in.Key = id, k
		if in.Now.IsZero() {
			in.Now = T0.Add(time.Duration(call))
		}
		h.AddOp(history.Op{Client: client, Input: in, Output: out, Call: call, Return: ret})
	}
	begin := func(client int, k stores.KeyRef, call, ret int64, d stores.Decision) {
		d.DecidedAt = T0.Add(time.Duration(call))
		add(client, k, models.Input{Kind: models.Begin, Fingerprint: "fp"}, models.Output{Decision: d}, call, ret)
	}
	for k := range n / 10 {
		key := stores.KeyRef{Tenant: "t0", Key: "order-" + strconv.Itoa(k)}
		order := "o" + strconv.Itoa(k)
		base := int64(k) * 20 * us
		c := k % 16
		tok := "tok-" + strconv.Itoa(k)
		res := stores.Response{Status: 201, Body: "charged " + order}
		replay := stores.Decision{Outcome: stores.Replay, Response: res}
		begin(c, key, base, base+10*us, stores.Decision{Outcome: stores.Claimed, Token: stores.Token(tok)})
		begin((c+1)%16, key, base+5*us, base+15*us, stores.Decision{Outcome: stores.InFlight})
		w := h.AddWork(history.WorkRun{Client: c, Key: key, Order: order, Token: stores.Token(tok), Start: base + 10*us})
		charge := l.Charge(order, "charge:"+order, c, base+20*us)
		h.EndWorkAt(w, base+40*us, false, charge)
		add(c, key, models.Input{Kind: models.Complete, Token: stores.Token(tok), Response: res, Now: T0.Add(time.Duration(base + 50*us))},
			models.Output{}, base+40*us, base+50*us)
		h.AddAnswer(history.Answer{Client: c, Key: key, Order: order, Fingerprint: "fp", Response: res, Status: res.Status, At: base + 50*us})
		for i := 1; i <= 6; i++ {
			call := base + int64(55+5*i)*us
			begin((c+i)%16, key, call, call+10*us, replay)
			h.AddAnswer(history.Answer{Client: (c + i) % 16, Key: key, Order: order, Fingerprint: "fp", Response: res, Status: res.Status, At: call + 10*us})
		}
		// The final liveness probe, after every client stopped.
		end := int64(n/10)*20*us + time.Millisecond.Nanoseconds() + int64(k)*us
		begin(ProbeClient, key, end, end+10*us, replay)
		if k%1000 == 999 {
			add(16, stores.KeyRef{}, models.Input{Kind: models.Prune}, models.Output{}, base, base+30*us)
		}
	}
	return h, l
}
