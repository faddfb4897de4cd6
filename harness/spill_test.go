package harness_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/report/htmlreport"
	"github.com/idemcheck/idemcheck/stores"
)

// spilledRun runs the scenarios on the memory store's variant at 200
// keys, each history going to disk past 1,024 calls (Options.SpillDir).
func spilledRun(t *testing.T, variant string, scenarios ...string) []spilledScenario {
	t.Helper()
	o := harnesstest.Options(t, "memory", variant, scenarios...)
	o.Keys = 200
	o.SpillDir, o.SpillAfter = filepath.Join(t.TempDir(), harness.SpillDir), 1024
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	_, fence := o.Declared()
	var out []spilledScenario
	spilled := 0
	for i := range sum.Scenarios {
		s := &sum.Scenarios[i]
		h := s.History()
		if h == nil || s.Check == nil {
			continue
		}
		if h.Spilled() {
			spilled++
		}
		// The same history, whole in memory: what history.jsonl loads
		// back to.
		var b bytes.Buffer
		if err := history.Write(&b, "s", h, s.Ledger()); err != nil {
			t.Fatal(err)
		}
		saved, err := history.Load(&b)
		if err != nil {
			t.Fatal(err)
		}
		if saved[0].Hist.Spilled() || len(saved[0].Hist.Ops()) != s.Ops {
			t.Fatalf("%s: history.jsonl holds %d calls, the run %d", s.ID(), len(saved[0].Hist.Ops()), s.Ops)
		}
		whole := harness.Judge(context.Background(), *s.Check, saved[0].Hist, saved[0].Ledger, fence, false)
		out = append(out, spilledScenario{name: s.ID().String(), spilled: h.Spilled(), parts: s.Checkers, whole: whole.Checkers, verdict: s.Verdict})
		// A report of a spilled history draws one part and traces from
		// the part of each key.
		var md bytes.Buffer
		if err := report.WriteTraces(&md, s, 3); err != nil {
			t.Fatal(err)
		}
		if len(s.Violations) > 0 && !bytes.Contains(md.Bytes(), []byte("client")) {
			t.Errorf("%s: the trace of a violated key shows no call:\n%s", s.ID(), md.String())
		}
	}
	if spilled == 0 {
		t.Fatal("no history spilled: the test judges nothing in parts")
	}
	page := t.TempDir()
	if err := htmlreport.Write(page, sum); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(page, htmlreport.FileName)); err != nil || !bytes.Contains(b, []byte("too large to draw whole")) {
		t.Errorf("the page of a spilled run does not say it draws one part (%v)", err)
	}
	return out
}

type spilledScenario struct {
	name         string
	spilled      bool
	parts, whole []check.Result
	verdict      check.Verdict
}

// sameResults reports whether two checkers' results say the same: verdict,
// detail, what they judged and their violations. Porcupine explains a key
// that is not linearizable by one of the orders it tried, which may name
// either of two claims made at once from one search to the next: for a
// failing linearizability result the keys it names are compared, not its
// words.
func sameResults(a, b []check.Result) bool {
	strip := func(rs []check.Result) []check.Result {
		out := make([]check.Result, len(rs))
		for i, r := range rs {
			r.Linearization = nil
			if r.Checker == check.Linearizable && r.Verdict == check.Fail {
				r.Detail = ""
				vs := make([]check.Violation, len(r.Violations))
				for j, v := range r.Violations {
					vs[j] = check.Violation{Checker: v.Checker, Key: v.Key}
				}
				r.Violations = vs
			}
			out[i] = r
		}
		return out
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

// TestSpilledRunIsJudgedAsWhole: a run whose histories went to disk as
// they grew is judged part by part to exactly what the same histories
// judged whole in memory give, every checker's verdict, detail, count and
// violations, for a correct store (a pass) and a mutant (a failure).
func TestSpilledRunIsJudgedAsWhole(t *testing.T) {
	for _, tc := range []struct {
		variant   string
		scenarios []string
		want      check.Verdict
	}{
		{stores.Correct, []string{"race", "abuse"}, check.Pass},
		{"select-then-insert", []string{"race"}, check.Fail},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			for _, s := range spilledRun(t, tc.variant, tc.scenarios...) {
				for i := range s.parts {
					if i >= len(s.whole) || !sameResults(s.parts[i:i+1], s.whole[i:i+1]) {
						t.Errorf("%s (spilled %v): judged in parts\n%.600s\nwhole\n%.600s", s.name, s.spilled, fmt.Sprintf("%+v", s.parts[i]), fmt.Sprintf("%+v", s.whole[min(i, len(s.whole)-1)]))
					}
				}
				if s.spilled && s.verdict != tc.want {
					t.Errorf("%s: %s, want %s", s.name, s.verdict, tc.want)
				}
			}
		})
	}
}

// TestSpillDirGoes: Recover removes the spill folder a dead run left
// (a spilled history is only whole with the memory of the process that
// wrote it; its journal holds every call).
func TestSpillDirGoes(t *testing.T) {
	dir := t.TempDir()
	spill := filepath.Join(dir, harness.SpillDir)
	if err := os.MkdirAll(filepath.Join(spill, "race#0"), 0o755); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(dir, harness.JournalFile)
	if err := os.WriteFile(journal, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _ = harness.Recover(context.Background(), journal) // an empty journal recovers nothing; the folder goes anyway
	if _, err := os.Stat(spill); !os.IsNotExist(err) {
		t.Fatalf("Recover left the dead run's %s: %v", spill, err)
	}
}
