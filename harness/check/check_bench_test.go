package check_test

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/history/historytest"
)

// BenchmarkCheckLargeHistory runs every checker, keeping what a page of
// the visualisation needs as a run asks for it, on a generated history of
// 100k and 1M operations (historytest.Sizes), and reports the process's
// peak resident memory (the generation included).
func BenchmarkCheckLargeHistory(b *testing.B) {
	historytest.BenchStorms(b, func(b *testing.B, h *history.History, l *history.Ledger) func(int) {
		return func(int) {
			for _, c := range check.Run(check.Evidence{Hist: h, Ledger: l, Model: historytest.StormModel, ProbeClient: historytest.ProbeClient, LinTimeout: time.Minute, Keep: true}) {
				if c.Verdict != check.Pass {
					b.Fatalf("%s: %s: %s %v", c.Checker, c.Verdict, c.Detail, c.Violations)
				}
			}
		}
	})
}
