package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
)

// TestJUnitOfARunCutShort: the JUnit report of a run stopped at its
// memory limit has a case for every scenario it planned: the finished
// one's checkers, the skipped one, the cut-short one's workload saying
// why the run stopped, and each that never ran, skipped with that
// reason. Those never run were left out: a dashboard showed a smaller
// suite that passed.
func TestJUnitOfARunCutShort(t *testing.T) {
	const stopped = "stopped at the memory limit: the harness held 97 MB"
	sum := &results.Summary{Store: "memory", Variant: "correct", Seed: 1, Interrupted: true, Stopped: stopped, NotRun: []string{"takeover", "crash"},
		Scenarios: []results.ScenarioResult{
			{Name: "race", Verdict: check.Pass, Checkers: []check.Result{{Checker: "at-most-once", Verdict: check.Pass, Judged: 1}, {Checker: "fencing", Verdict: check.Pass, Judged: 1}}},
			{Name: "heartbeat", Verdict: check.Skipped, Skipped: "the store does not renew leases"},
			{Name: "abuse", Verdict: check.Unknown, Error: "interrupted: context canceled", Checkers: []check.Result{{Checker: "at-most-once", Verdict: check.Pass, Judged: 1}}},
		}}
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := WriteJUnit(path, sum); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JUnit XML: %v\n%s", err, b)
	}
	s := got.Suites[0]
	if s.Tests != len(s.Cases) || s.Tests != 7 || s.Skipped != 4 || s.Failures != 0 {
		t.Fatalf("tests %d (cases %d), skipped %d, failures %d; want 7 cases, 4 skipped:\n%s", s.Tests, len(s.Cases), s.Skipped, s.Failures, b)
	}
	notRun := 0
	for _, c := range s.Cases {
		if c.Skipped == nil {
			continue
		}
		switch {
		case strings.HasSuffix(c.Class, ".takeover") || strings.HasSuffix(c.Class, ".crash"):
			if c.Skipped.Message == "not run: "+stopped {
				notRun++
			}
		case c.Name == "workload" && !strings.Contains(c.Skipped.Message, stopped):
			t.Errorf("the cut-short scenario's skip does not say why the run stopped: %q", c.Skipped.Message)
		}
	}
	if notRun != 2 {
		t.Errorf("%d of the 2 scenarios never run are skipped with the run's stop:\n%s", notRun, b)
	}
}

// TestJUnitCarriesNotes: a scenario's notes (what its pass did not
// judge) are each of its cases' system-out, where CI shows them; the
// JUnit report of a pass with notes was bare passing cases.
func TestJUnitCarriesNotes(t *testing.T) {
	const note = "renewing a working owner's lease was not tested: 2 of 8 orders"
	sum := &results.Summary{Store: "exec", Variant: "correct", Seed: 1, Scenarios: []results.ScenarioResult{
		{Name: "heartbeat", Verdict: check.Pass, Notes: []string{note}, Checkers: []check.Result{{Checker: "at-most-once", Verdict: check.Pass, Judged: 1}, {Checker: "fencing", Verdict: check.Pass, Judged: 1}}},
		{Name: "race", Verdict: check.Pass, Checkers: []check.Result{{Checker: "at-most-once", Verdict: check.Pass, Judged: 1}}},
	}}
	got, _ := junitOf(t, sum)
	for _, c := range got.Suites[0].Cases {
		heartbeat := strings.HasSuffix(c.Class, ".heartbeat")
		if heartbeat != strings.Contains(c.Out, "note: "+note) {
			t.Errorf("%s %s: system-out %q", c.Class, c.Name, c.Out)
		}
	}
}

// TestJUnitSaysNothingJudged: a checker that passed with nothing to judge
// (the report's "—") was a plain passing testcase; it is a skip saying
// so.
func TestJUnitSaysNothingJudged(t *testing.T) {
	sum := &results.Summary{Store: "sqlite", Variant: "correct", Seed: 1, Scenarios: []results.ScenarioResult{
		{Name: "race", Verdict: check.Pass, Checkers: []check.Result{{Checker: "at-most-once", Verdict: check.Pass, Judged: 8},
			{Checker: "mismatch", Verdict: check.Pass, Detail: "no request reused a key with other parameters"}}},
	}}
	got, b := junitOf(t, sum)
	s := got.Suites[0]
	if s.Skipped != 1 {
		t.Fatalf("skipped %d, want the checker that judged nothing:\n%s", s.Skipped, b)
	}
	for _, c := range s.Cases {
		if (c.Name == "mismatch") != (c.Skipped != nil && strings.Contains(c.Skipped.Message, "nothing to judge: no request reused")) {
			t.Errorf("case %s: skipped %+v", c.Name, c.Skipped)
		}
	}
}

// junitOf writes sum's JUnit XML and reads it back: the suites, and the
// file's bytes for messages.
func junitOf(t *testing.T, sum *results.Summary) (junitSuites, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := WriteJUnit(path, sum); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JUnit XML: %v\n%s", err, b)
	}
	return got, b
}
