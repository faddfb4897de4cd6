package check_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// bigHistory records n operations of a retry storm on n/10 keys by 16
// clients, as a correct store answers it: per key a claim, a 409 to a
// concurrent request, the work and its charge, the save, six replays
// and the final probe's; the keys overlap in time (about five at once), and a
// store-wide Prune is called every 10,000 operations.
func bigHistory(n int) (*history.History, *history.Ledger) {
	h, l := history.New(), history.NewLedger()
	const us = int64(time.Microsecond)
	id := 0
	add := func(client int, k stores.KeyRef, in models.Input, out models.Output, call, ret int64) {
		id++
		in.ID, in.Key = id, k
		if in.Now.IsZero() {
			in.Now = t0.Add(time.Duration(call))
		}
		h.AddOp(history.Op{Client: client, Input: in, Output: out, Call: call, Return: ret})
	}
	begin := func(client int, k stores.KeyRef, call, ret int64, d stores.Decision) {
		d.DecidedAt = t0.Add(time.Duration(call))
		add(client, k, models.Input{Kind: models.Begin, Fingerprint: "fp"}, models.Output{Decision: d}, call, ret)
	}
	for k := range n / 10 {
		key := stores.KeyRef{Tenant: "t0", Key: "order-" + strconv.Itoa(k)}
		order := "o" + strconv.Itoa(k)
		base := int64(k) * 20 * us
		c := k % 16
		tok := "tok-" + strconv.Itoa(k)
		res := stores.Response{Status: 201, Body: "charged " + order}
		begin(c, key, base, base+10*us, claimedD(tok, false))
		begin((c+1)%16, key, base+5*us, base+15*us, inFlightD)
		w := h.AddWork(history.WorkRun{Client: c, Key: key, Order: order, Token: stores.Token(tok), Start: base + 10*us})
		charge := l.Charge(order, "charge:"+order, c, base+20*us)
		h.EndWorkAt(w, base+40*us, false, charge)
		add(c, key, models.Input{Kind: models.Complete, Token: stores.Token(tok), Response: res, Now: t0.Add(time.Duration(base + 50*us))},
			models.Output{}, base+40*us, base+50*us)
		h.AddAnswer(history.Answer{Client: c, Key: key, Order: order, Fingerprint: "fp", Response: res, Status: res.Status, At: base + 50*us})
		for i := 1; i <= 6; i++ {
			call := base + int64(55+5*i)*us
			begin((c+i)%16, key, call, call+10*us, replayD(res))
			h.AddAnswer(history.Answer{Client: (c + i) % 16, Key: key, Order: order, Fingerprint: "fp", Response: res, Status: res.Status, At: call + 10*us})
		}
		// The final liveness probe, after every client stopped.
		end := int64(n/10)*20*us + time.Millisecond.Nanoseconds() + int64(k)*us
		begin(probe, key, end, end+10*us, replayD(res))
		if k%1000 == 999 {
			add(16, stores.KeyRef{}, models.Input{Kind: models.Prune}, models.Output{}, base, base+30*us)
		}
	}
	return h, l
}

// BenchmarkCheckLargeHistory runs every checker, keeping what a page of
// the visualisation needs as a run asks for it, on a generated history of
// 100k and 1M operations, and reports the process's peak resident memory
// (VmHWM, the generation included).
func BenchmarkCheckLargeHistory(b *testing.B) {
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			h, l := bigHistory(n)
			m := models.Config{LockTTL: 100 * time.Millisecond, Retention: time.Hour}
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				for _, c := range check.Run(check.Evidence{Hist: h, Ledger: l, Model: m, ProbeClient: probe, LinTimeout: time.Minute, Keep: true}) {
					if c.Verdict != check.Pass {
						b.Fatalf("%s: %s: %s %v", c.Checker, c.Verdict, c.Detail, c.Violations)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			// CPU seconds per check, of every thread of the process: on a
			// shared machine the wall time says more about the neighbours.
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			}
			if hwm := peakRSS(); hwm > 0 {
				b.ReportMetric(hwm, "peak-MB")
			}
		})
	}
}

// peakRSS is the process's peak resident set in MB, from /proc (0 where
// there is none).
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// benchSizes are the history sizes BenchmarkCheckLargeHistory checks:
// 100k and 1M operations, or IDEM_CHECK_BENCH_OPS (comma-separated).
func benchSizes() []int {
	v := os.Getenv("IDEM_CHECK_BENCH_OPS")
	if v == "" {
		return []int{100_000, 1_000_000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}
