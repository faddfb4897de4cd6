package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayOfAnotherCommandsRun: replay given a soak's or a black-box
// run's directory says which command's run it is (exit 2, one line),
// where it printed the loader's errors: `unknown store ""`, or a JSON
// field of another type.
func TestReplayOfAnotherCommandsRun(t *testing.T) {
	out := t.TempDir()
	if code, stdout, stderr := runCLI(t, "soak", "--store", "memory", "--seeds", "1", "--hogs", "0", "--scenario", "race", "--out", out); code != exitPass {
		t.Fatalf("soak: exit %d\n%s%s", code, stdout, stderr)
	}
	soaks, _ := filepath.Glob(filepath.Join(out, "*-soak"))
	if len(soaks) != 1 {
		t.Fatalf("soak directories %v", soaks)
	}
	httpRun := t.TempDir()
	if err := os.WriteFile(filepath.Join(httpRun, "summary.json"), []byte(`{"run":{"targets":["http://127.0.0.1:1/orders"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, cmd := range map[string]string{soaks[0]: "soak", httpRun: "http"} {
		code, stdout, stderr := runCLI(t, "replay", dir)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "is a run of idemcheck "+cmd+":") {
			t.Errorf("replay of a %s run: exit %d\nstdout: %s\nstderr: %s", cmd, code, stdout, stderr)
		}
	}
}
