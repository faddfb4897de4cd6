package main

import (
	"context"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/history/historytest"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/results"
)

// BenchmarkWriteRun writes a run's files (history.jsonl, summary, the
// Markdown and HTML reports: writeRun, as `idemcheck check` does) for one
// scenario whose history is a generated retry storm of 100k and 1M
// operations (historytest.Sizes), judged first as a run judges it. Its
// ops/s at the two sizes show whether writing grows linearly.
func BenchmarkWriteRun(b *testing.B) {
	historytest.BenchStorms(b, func(b *testing.B, h *history.History, l *history.Ledger) func(int) {
		m := historytest.StormModel
		j := harness.Judge(context.Background(), check.Params{LockTTL: m.LockTTL, Retention: m.Retention, ProbeClient: historytest.ProbeClient}, h, l, nil, true)
		if j.Verdict != check.Pass {
			b.Fatalf("the generated history: %s %v", j.Verdict, j.Violations)
		}
		sr := results.ScenarioResult{Name: "storm", Verdict: j.Verdict, Checkers: j.Checkers, Violations: j.Violations, Ops: len(h.Ops()), Check: &j.Params}
		sr.Attach(h, l)
		sum := &results.Summary{Store: "memory", Variant: "correct", Verdict: j.Verdict, Scenarios: []results.ScenarioResult{sr},
			Violations: []check.Violation{}, Started: historytest.T0, Ended: historytest.T0.Add(time.Second)}
		root := b.TempDir()
		return func(i int) {
			dir, err := report.PrepareRunDir(root, "memory", "correct", historytest.T0.Add(time.Duration(i)*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			if errs := writeRun(dir, sum, ""); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
}
