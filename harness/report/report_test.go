package report_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// A fenced save's trace line carries the store's own error text, so that
// "fenced" can be told apart: a lease that ended, a takeover, a foreign
// token.
func TestTraceShowsTheStoresError(t *testing.T) {
	h, l := history.New(), history.NewLedger()
	key := stores.KeyRef{Tenant: "t0", Key: "order-o000"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp", Now: now, ID: 1},
		Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "tok-1"}}, Call: 0, Return: int64(time.Millisecond)})
	h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Complete, Key: key, Token: "tok-1", Now: now.Add(time.Second), ID: 2},
		Output: models.Output{Fenced: true}, Call: int64(time.Second), Return: int64(time.Second + time.Millisecond),
		Err: "idempotency: fenced: lease of tok-1 ended at 00:00:00.100"})
	lines := strings.Join(report.TraceLines(h, l, key.String()), "\n")
	if !strings.Contains(lines, "→ fenced") || !strings.Contains(lines, "store said: idempotency: fenced: lease of tok-1 ended") {
		t.Fatalf("the fenced save's line does not carry the store's error:\n%s", lines)
	}
	if strings.Count(lines, "store said") != 1 {
		t.Fatalf("only the call that erred should carry an error:\n%s", lines)
	}
}

// TestTraceNamesAWorkerKill: a worker killed at a random moment (no
// failpoint) reads as a kill of its process, with no empty "at": it
// printed "CRASHED at " and nothing after.
func TestTraceNamesAWorkerKill(t *testing.T) {
	h := history.New()
	key := stores.KeyRef{Tenant: "t0", Key: "order-o000"}
	h.AddFault(history.Fault{Client: 3, Key: key, Kind: history.FaultWorkerKill, Start: int64(time.Millisecond), End: int64(time.Millisecond)})
	h.AddFault(history.Fault{Client: 4, Key: key, Kind: history.FaultCrash, Failpoint: "run.after-claim", Start: int64(2 * time.Millisecond), End: int64(2 * time.Millisecond)})
	lines := strings.Join(report.TraceLines(h, history.NewLedger(), key.String()), "\n")
	if !strings.Contains(lines, "client 3   KILLED (its worker process, SIGKILL)\n") || !strings.Contains(lines, "client 4   CRASHED at run.after-claim") {
		t.Fatalf("the kills read:\n%s", lines)
	}
}

// TestRunsEndingAtOnceShareARoot: runs that write their results into one
// root at the same moment (idemtest in test packages run side by side) all
// succeed, and latest names one of them.
func TestRunsEndingAtOnceShareARoot(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dirs := make([]*report.RunDir, 8)
	for i := range dirs {
		d, err := report.PrepareRunDir(root, "memory", "correct", now.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = d
	}
	var wg sync.WaitGroup
	errs := make([]error, len(dirs))
	for i, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := d.Write(&results.Summary{Store: "memory", Variant: "correct"}); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	link, err := os.Readlink(filepath.Join(root, "latest"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, link, "summary.json")); err != nil {
		t.Errorf("latest -> %s, which has no summary: %v", link, err)
	}
}

// TestSummaryIsWrittenLast: a run directory whose history could not be
// written has no summary.json, so it is never read as a whole run (the
// run's journal, kept, is recovered instead). Its report.md, the verdict
// for a person, is written all the same (a full disk that took the
// history left it out, and the summary pointed at it).
func TestSummaryIsWrittenLast(t *testing.T) {
	d, err := report.PrepareRunDir(t.TempDir(), "memory", "correct", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	// A directory where the history goes: its file cannot be created.
	if err := os.Mkdir(filepath.Join(d.Path, "history.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := d.Write(&results.Summary{Store: "memory", Variant: "correct"}); err == nil {
		t.Fatal("Write succeeded without its history")
	}
	if _, err := os.Stat(filepath.Join(d.Path, "summary.json")); err == nil {
		t.Error("summary.json written though the history was not")
	}
	if _, err := os.Stat(filepath.Join(d.Path, "report.md")); err != nil {
		t.Errorf("report.md not written beside a history that was not: %v", err)
	}
}

// report.md says why a scenario was undecided or skipped, and what a pass
// did not judge, not only summary.json.
func TestReportSaysWhyUndecided(t *testing.T) {
	d, err := report.PrepareRunDir(t.TempDir(), "memory", "correct", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	sum := &results.Summary{Store: "memory", Variant: "correct", Verdict: check.Unknown, Scenarios: []results.ScenarioResult{
		{Name: "abuse", Verdict: check.Unknown, Error: "workload incomplete: the owner could not claim it"},
		{Name: "sched-race", Verdict: check.Pass, Notes: []string{"interleaved only between store calls"}},
		{Name: "heartbeat", Verdict: check.Skipped, Skipped: "the store does not extend claims"},
	}}
	if err := d.Write(sum); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(d.Path, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Undecided: workload incomplete", "Note: interleaved only between store calls", "Skipped: the store does not extend claims"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report.md lacks %q:\n%s", want, b)
		}
	}
}

// TestReportTableSaysNothingJudged: in report.md's table, a checker that
// passed having judged nothing (Judged 0) shows as such, not as "pass",
// and a line under the table says what the mark means.
func TestReportTableSaysNothingJudged(t *testing.T) {
	d, err := report.PrepareRunDir(t.TempDir(), "memory", "correct", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	sum := &results.Summary{Store: "memory", Variant: "correct", Verdict: check.Pass, Scenarios: []results.ScenarioResult{
		{Name: "race", Verdict: check.Pass, Checkers: []check.Result{
			{Checker: check.AtMostOnce, Verdict: check.Pass, Judged: 8, Detail: "8 orders"},
			{Checker: check.Mismatch, Verdict: check.Pass, Detail: "no reuse with other parameters"},
		}},
	}}
	if err := d.Write(sum); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(d.Path, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| race | pass | 0 | 0 | none | pass | — |") || !strings.Contains(string(b), "—: the checker passed with nothing to judge") {
		t.Errorf("report.md's table does not set apart the pass that judged nothing:\n%s", b)
	}
}

// TestPrepareRunDirTakesTheNextName: runs started in the same millisecond
// beside each other, of one store and variant (CI shards, make -j), each
// get a directory of their own, named a millisecond later, in the same
// format; the second was refused ("file exists").
func TestPrepareRunDirTakesTheNextName(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		d, err := report.PrepareRunDir(root, "memory", "correct", at)
		if err != nil {
			t.Fatalf("run %d in the same millisecond: %v", i, err)
		}
		if seen[d.Path] {
			t.Fatalf("run %d given %s again", i, d.Path)
		}
		seen[d.Path] = true
		if want := fmt.Sprintf("20260101-000000.%03d-memory-correct", i); filepath.Base(d.Path) != want {
			t.Errorf("run %d: %s, want %s", i, filepath.Base(d.Path), want)
		}
	}
}
