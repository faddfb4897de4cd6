package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMutateJSON: two generated SQLite mutants as JSON, with the fields CI
// reads: one killed, one argued equivalent (with its argument and diff).
func TestMutateJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "mutate", "--store", "sqlite", "--json", "--scenario", "sched-takeover",
		"--quick", "1m", "--episodes", "8", "--budget", "0", "--only", `release: drop-conjunct "token,takeover: drop-conjunct "token`)
	if code != exitPass {
		t.Fatalf("exit %d, stderr %q, stdout %s", code, stderr, stdout)
	}
	var rep struct {
		Store   string  `json:"store"`
		Score   float64 `json:"score"`
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
	if rep.Store != "sqlite" || len(rep.Mutants) != 2 || rep.Score != 1 {
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
