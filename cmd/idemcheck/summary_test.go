package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/stores"
)

// TestSummarySaysResultsAreIncomplete: the summary's last line names the
// results directory as incomplete when some of the run's files could not
// be written (a full disk), and as it is otherwise.
func TestSummarySaysResultsAreIncomplete(t *testing.T) {
	sum := &results.Summary{Store: "memory", Variant: "correct", Verdict: check.Pass, Dir: "/r/run"}
	var b bytes.Buffer
	printSummary(&b, sum, 2)
	if !strings.Contains(b.String(), "Results: /r/run (incomplete: 2 report writes failed, as said above; the verdict stands)") {
		t.Errorf("two writes failed, and the summary does not say so:\n%s", b.String())
	}
	b.Reset()
	printSummary(&b, sum, 0)
	if !strings.HasSuffix(b.String(), "Results: /r/run\n") {
		t.Errorf("every file written, and the summary's last line is not the directory:\n%s", b.String())
	}
	// The fault schedules are in report.md: named only where it was
	// written (a full disk left it out, and the summary pointed at it).
	sum.Dir = t.TempDir()
	sum.Scenarios = []results.ScenarioResult{{Name: "chaos", Schedule: []string{"pause at 1s"}}}
	b.Reset()
	printSummary(&b, sum, 1)
	if strings.Contains(b.String(), "report.md") {
		t.Errorf("report.md, not written, is named:\n%s", b.String())
	}
	if err := os.WriteFile(filepath.Join(sum.Dir, "report.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	printSummary(&b, sum, 0)
	if !strings.Contains(b.String(), "fault schedules of chaos") {
		t.Errorf("report.md written, and the schedules are not pointed at:\n%s", b.String())
	}
}

// TestSummarySaysASharedNoteOnce: a note that several scenarios made
// word for word is said once after the table, naming them; a note of one
// scenario stays under its row.
func TestSummarySaysASharedNoteOnce(t *testing.T) {
	shared, own := "interleaved only between store calls", "a planned worker kill did not happen"
	sum := &results.Summary{Store: "lease", Variant: "correct", Verdict: check.Pass, Dir: "/r/run", Scenarios: []results.ScenarioResult{
		{Name: "sched-race", Verdict: check.Pass, Notes: []string{shared}},
		{Name: "workers", Verdict: check.Pass, Notes: []string{own}},
		{Name: "sched-crash", Verdict: check.Pass, Notes: []string{shared}},
	}}
	var b bytes.Buffer
	printSummary(&b, sum, 0)
	out := b.String()
	if n := strings.Count(out, shared); n != 1 || !strings.Contains(out, "\nnote of sched-race, sched-crash: "+shared+"\n") {
		t.Errorf("the shared note is said %d times, or not once naming both scenarios:\n%s", n, out)
	}
	if !strings.Contains(out, "note: "+own+"\n") || strings.Contains(out, "note of workers") {
		t.Errorf("the note of one scenario is not under its row:\n%s", out)
	}
}

// TestWarnCostSaysTheDiskIsTooSmall: a run whose journal and history
// would take more than its results directory's disk has free is told so
// before it starts; a small run is not.
func TestWarnCostSaysTheDiskIsTooSmall(t *testing.T) {
	b, err := stores.Lookup("memory")
	if err != nil {
		t.Fatal(err)
	}
	o := harness.DefaultOptions()
	o.Backend, o.Scenarios = b, []string{"race"}
	o.SpillDir = filepath.Join(t.TempDir(), harness.SpillDir)
	var w bytes.Buffer
	warnCost(&w, o)
	if strings.Contains(w.String(), "may write about") {
		t.Errorf("a default race warned of the disk:\n%s", w.String())
	}
	o.Keys, o.Clients = 100_000_000, 10_000 // terabytes of history
	w.Reset()
	warnCost(&w, o)
	if !strings.Contains(w.String(), "that disk has") || !strings.Contains(w.String(), "the verdict stands") {
		t.Errorf("a run of terabytes did not warn of the disk:\n%s", w.String())
	}
}

// TestSummaryNamesRepeatedScenariosOnce: with --count 2 each scenario
// runs twice; the lines naming scenarios say each once, and the
// findings of each repetition are told apart: they were printed twice
// word for word, and the lists named every scenario twice.
func TestSummaryNamesRepeatedScenariosOnce(t *testing.T) {
	sum := &results.Summary{Store: "memory", Variant: "correct", Verdict: check.Pass, Dir: t.TempDir(), LockTTL: results.Duration(250 * time.Millisecond)}
	if err := os.WriteFile(filepath.Join(sum.Dir, "report.md"), nil, 0o644); err != nil { // the fault schedules are there
		t.Fatal(err)
	}
	for rep := 0; rep < 2; rep++ {
		sum.Scenarios = append(sum.Scenarios,
			results.ScenarioResult{Name: "sched-race", Repetition: rep, Verdict: check.Pass, LockTTL: results.Duration(100 * time.Millisecond)},
			results.ScenarioResult{Name: "skew", Repetition: rep, Verdict: check.Pass, Schedule: []string{"t0: skew"}, Findings: map[string]int{"skew_takeovers": 8}})
	}
	var b bytes.Buffer
	printSummary(&b, sum, 0)
	out := b.String()
	for _, want := range []string{"LockTTL 100ms in sched-race: ", "fault schedules of skew (", "findings of skew (", "findings of skew.2 ("} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
}
