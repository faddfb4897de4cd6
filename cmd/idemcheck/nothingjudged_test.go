package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNothingJudgedIsNotAPass: a check whose every scenario is skipped on
// the store (network faults on embedded SQLite) judged nothing: it exits
// 3 and says so, with the verdict "skipped" in summary.json, where it
// printed PASS and exited 0. One scenario that runs and passes beside a
// skipped one is still a pass. A soak of such runs says nothing was
// judged too.
func TestNothingJudgedIsNotAPass(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--store", "sqlite", "--scenario", "network,store-faults", "--out", out)
	if code != exitUnknown || strings.Contains(stdout, "PASS") || !strings.Contains(stdout, "nothing was judged") {
		t.Errorf("every scenario skipped: exit %d, want %d and no PASS; stdout:\n%s\nstderr:\n%s", code, exitUnknown, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "latest", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum struct{ Verdict string }
	if err := json.Unmarshal(b, &sum); err != nil || sum.Verdict != "skipped" {
		t.Errorf("summary.json verdict %q (%v), want skipped", sum.Verdict, err)
	}

	if code, stdout, _ := runCLI(t, "check", "--store", "sqlite", "--scenario", "network,race", "--out", t.TempDir()); code != exitPass || !strings.Contains(stdout, "PASS: 1 scenario passed, 1 skipped") {
		t.Errorf("one scenario passed, one skipped: exit %d, stdout:\n%s", code, stdout)
	}

	code, stdout, stderr = runCLI(t, "soak", "--store", "sqlite", "--scenario", "network", "--seeds", "2", "--hogs", "0", "--out", t.TempDir())
	if code != exitUnknown || !strings.Contains(stdout+stderr, "nothing was judged") {
		t.Errorf("a soak of skipped runs: exit %d, want %d saying nothing was judged; stdout:\n%s\nstderr:\n%s", code, exitUnknown, stdout, stderr)
	}
}
