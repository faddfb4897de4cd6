package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/mutate"
)

// TestMutateJSON: two generated SQLite mutants as JSON, with the fields CI
// reads: one killed, one argued equivalent (with its argument and diff).
func TestMutateJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "mutate", "--store", "sqlite", "--json", "--out", t.TempDir(), "--scenario", "sched-takeover",
		"--quick", "1m", "--episodes", "8", "--budget", "0", "--only", `release: drop-conjunct "token,takeover: drop-conjunct "token`)
	if code != exitPass {
		t.Fatalf("exit %d, stderr %q, stdout %s", code, stderr, stdout)
	}
	var rep struct {
		Store   string  `json:"store"`
		Score   float64 `json:"score"`
		Verdict string  `json:"verdict"` // the run's, as check's, soak's and mutants' say theirs

		Mutants []struct {
			ID       string   `json:"id"`
			Verdict  string   `json:"verdict"`
			Checker  string   `json:"checker"`
			Argument string   `json:"argument"`
			Diff     []string `json:"diff"`
		} `json:"mutants"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, stdout)
	}
	// A piped run says where it is as it goes: its plan, and the mutants
	// settled (the last always), on stderr beside the JSON.
	if !strings.Contains(stderr, "idemcheck mutate: 2 mutants, each tried on up to 1 scenarios (sched-takeover)") ||
		!strings.Contains(stderr, "idemcheck mutate: [2/2] mutants settled (1 killed, 0 survived, 1 neither so far)") {
		t.Errorf("the piped run's progress lines are missing:\n%s", stderr)
	}
	if rep.Store != "sqlite" || len(rep.Mutants) != 2 || rep.Score != 1 || rep.Verdict != "pass" {
		t.Fatalf("store %q, %d mutants, score %v:\n%s", rep.Store, len(rep.Mutants), rep.Score, stdout)
	}
	for _, m := range rep.Mutants {
		want := "killed"
		if strings.HasPrefix(m.ID, "takeover:") {
			want = "equivalent"
		}
		if m.Verdict != want || len(m.Diff) < 2 || (want == "killed") != (m.Checker != "") || (want == "equivalent") != (m.Argument != "") {
			t.Errorf("%s: %s by %q, argument %q, diff %q; want %s", m.ID, m.Verdict, m.Checker, m.Argument, m.Diff, want)
		}
	}
}

// TestMutateNotApplicable: the memory store has no statements; mutate says
// why and exits 0.
func TestMutateNotApplicable(t *testing.T) {
	code, stdout, stderr := runCLI(t, "mutate", "--store", "memory")
	if code != exitPass || !strings.Contains(stdout, "not applicable: its decisions are Go conditions") {
		t.Fatalf("exit %d, stderr %q, stdout %s", code, stderr, stdout)
	}
}

// TestMutateVerdictLine: an interrupted mutation run says so and exits 3,
// whether the interrupt came during the correct store's runs or among the
// mutants (those cut short are "interrupted", not scored), and never
// prints FAIL for it; a correct store caught failing before the interrupt
// still fails the run; a run that scored no mutant (all equivalent) is
// undecided, not a failure with a score of 0%.
func TestMutateVerdictLine(t *testing.T) {
	passed := mutate.BaselineRun{Scenario: "sched-race", Passed: true, Seconds: 1}
	cut := mutate.BaselineRun{Scenario: "sched-takeover", Interrupted: true}
	failed := mutate.BaselineRun{Scenario: "sched-takeover", Checker: "at-most-once", Detail: "charged twice"}
	killed := mutate.Result{Mutant: mutate.Mutant{ID: "complete: drop-conjunct"}, Verdict: mutate.Killed, Scenario: "sched-race", Checker: "fencing"}
	unrun := mutate.Result{Mutant: mutate.Mutant{ID: "release: drop-conjunct"}, Verdict: mutate.Interrupted}
	argued := mutate.Result{Mutant: mutate.Mutant{ID: "takeover: drop-conjunct"}, Verdict: mutate.Equivalent, Argument: "implied"}
	for _, c := range []struct {
		name     string
		rep      mutate.Report
		code     int
		want     []string
		unwanted []string
	}{
		{"during the correct store's runs", mutate.Report{Baseline: []mutate.BaselineRun{passed, cut}, Interrupted: true}, exitUnknown,
			[]string{"sched-takeover   not finished: the run was interrupted", "UNDECIDED: the run was interrupted before the correct store finished"},
			[]string{"FAIL"}},
		{"among the mutants", mutate.Report{Baseline: []mutate.BaselineRun{passed}, Results: []mutate.Result{killed, unrun}, Interrupted: true}, exitUnknown,
			[]string{"not judged: 1 mutant(s), interrupted before their verdict", "\n  release: drop-conjunct\n", "UNDECIDED (interrupted", "score 100.0% (1 killed of 1 not equivalent", "1 not judged: interrupted"},
			[]string{"FAIL", "PASS", "survived"}},
		{"a survivor that keeps the score low whatever the rest", mutate.Report{Baseline: []mutate.BaselineRun{passed},
			Results: []mutate.Result{killed, unrun, {Mutant: mutate.Mutant{ID: "begin: drop-conjunct"}, Verdict: mutate.Survived}}, Interrupted: true}, exitFail,
			[]string{"FAIL (interrupted; the survivors judged already keep the score at most 66.7%, below 95%, whatever the rest)"},
			[]string{"UNDECIDED"}},
		{"after the correct store failed", mutate.Report{Baseline: []mutate.BaselineRun{passed, failed}, Interrupted: true}, exitFail,
			[]string{"FAIL at-most-once: charged twice", "FAIL: the correct store failed"},
			[]string{"UNDECIDED"}},
		{"nothing scored", mutate.Report{Baseline: []mutate.BaselineRun{passed}, Results: []mutate.Result{argued}}, exitUnknown,
			[]string{"UNDECIDED (no mutant was scored: nothing was judged): no score (0 killed of 0 not equivalent; 1 equivalent"},
			[]string{"FAIL", "PASS", "0.0%"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := c.rep
			rep.Store, rep.Seed = "sqlite", 1
			rep.Tally()
			var out strings.Builder
			printMutate(&out, &rep, 0.95)
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("no %q in:\n%s", w, out.String())
				}
			}
			for _, u := range c.unwanted {
				if strings.Contains(out.String(), u) {
					t.Errorf("%q in:\n%s", u, out.String())
				}
			}
			if code := mutateExit(&rep, 0.95); code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
		})
	}
}

// TestMutateNothingJudged: mutants whose every scenario is skipped on the
// store (network faults on embedded SQLite) are unjudged and the run
// undecided: it listed them as survivors and failed with a score of 0 (a
// pass with --min-score 0), nothing having run. A --min-score outside 0
// to 1 and a shard past the mutants are refused at once.
func TestMutateNothingJudged(t *testing.T) {
	for _, minScore := range []string{"0.95", "0"} {
		code, stdout, stderr := runCLI(t, "mutate", "--store", "sqlite", "--scenario", "network", "--limit", "2", "--min-score", minScore, "--out", t.TempDir())
		if code != exitUnknown || !strings.Contains(stdout, "nothing was judged") || strings.Contains(stdout, "survived    ") {
			t.Errorf("--min-score %s: exit %d, want 3 and unjudged mutants:\n%s\n%s", minScore, code, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"--min-score", "2"}, {"--min-score", "-1"}, {"--shard", "80/80", "--limit", "3"}} {
		code, _, stderr := runCLI(t, append([]string{"mutate", "--store", "sqlite", "--out", t.TempDir()}, args...)...)
		if code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and why", args, code, stderr)
		}
	}
}
