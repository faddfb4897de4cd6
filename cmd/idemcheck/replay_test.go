package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReplayRunsTheSavedInterleaving: a failing scheduled run of a mutant
// replays on its saved choices and fails again (exit 1). The same run
// with its variant set to the correct store passes (exit 0), and, where
// the run's episodes ran past LockTTL between the clock's ticks, says
// that the run's interleaving may not have been the seed's alone.
func TestReplayRunsTheSavedInterleaving(t *testing.T) {
	dir := mutantRun(t, 2)
	code, stdout, stderr := runCLI(t, "replay", dir)
	if code != exitFail || !strings.Contains(stdout, "=> fails again: ") || !strings.Contains(stdout, "FAIL: ") {
		t.Fatalf("replay of the mutant's run: exit %d, want %d and its episodes failing again\n%s%s", code, exitFail, stdout, stderr)
	}
	if strings.Contains(stdout, "past LockTTL") {
		t.Errorf("replay says an episode outran LockTTL on a store with the harness's clock:\n%s", stdout)
	}

	// The same run, said to be of the correct store, whose episodes ran a
	// minute between ticks.
	sayCorrect(t, dir, func(sum map[string]any) {
		for _, sc := range sum["scenarios"].([]any) {
			for _, ep := range sc.(map[string]any)["episodes"].([]any) {
				ep.(map[string]any)["unticked_ns"] = time.Minute
			}
		}
	})
	code, stdout, stderr = runCLI(t, "replay", dir)
	if code != exitPass || !strings.Contains(stdout, "PASS: no replayed episode failed") {
		t.Fatalf("replay on the correct store: exit %d, want %d\n%s%s", code, exitPass, stdout, stderr)
	}
	if !strings.Contains(stdout, "=> passes now; the run's episode ran 1m0s of real time between the clock's ticks, past LockTTL") {
		t.Errorf("replay does not say the run's episode outran LockTTL:\n%s", stdout)
	}
}

// mutantRun runs select-then-insert's sched-race on keys keys and returns
// its run directory (the run fails, as it must).
func mutantRun(t *testing.T, keys int) string {
	t.Helper()
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--store", "sqlite", "--variant", "select-then-insert", "--scenario", "sched-race",
		"--keys", fmt.Sprint(keys), "--out", out)
	if code != exitFail {
		t.Fatalf("check of select-then-insert: exit %d, want %d\n%s%s", code, exitFail, stdout, stderr)
	}
	dirs, err := filepath.Glob(filepath.Join(out, "2*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("want one run directory under %s, got %v (%v)", out, dirs, err)
	}
	return dirs[0]
}

// sayCorrect rewrites the run in dir's summary as the correct store's,
// with edit's changes: its failures then do not come back on replay.
func sayCorrect(t *testing.T, dir string, edit func(sum map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "summary.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatal(err)
	}
	sum["variant"] = "correct"
	if edit != nil {
		edit(sum)
	}
	if raw, err = json.Marshal(sum); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cancelOnWrite cancels a context at the first write that holds mark.
type cancelOnWrite struct {
	strings.Builder
	mark   string
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.mark) {
		w.cancel()
	}
	return w.Builder.Write(p)
}

// TestInterruptedReplayIsNotAPass: a replay interrupted after its first
// episode, on a run whose failures do not come back (the correct store),
// is undecided (exit 3), its cut episode not judged: it printed "PASS: no
// replayed episode failed" and exited 0, the cut episode's calls ended in
// the cancel and counted as "passes now".
func TestInterruptedReplayIsNotAPass(t *testing.T) {
	dir := mutantRun(t, 4)
	sayCorrect(t, dir, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelOnWrite{mark: "=> passes now", cancel: cancel}
	code, err := cmdReplay(ctx, []string{dir}, w, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(w.String(), "=> passes now"); n != 1 {
		t.Fatalf("want one episode replayed before the interrupt, got %d:\n%s", n, w.String())
	}
	if code != exitUnknown || !strings.Contains(w.String(), "cut short by the interrupt, not judged") || !strings.Contains(w.String(), "INTERRUPTED: 1 of ") {
		t.Fatalf("replay interrupted after one episode: exit %d, want %d, the cut episode not judged\n%s", code, exitUnknown, w.String())
	}
}

// TestReplayScenarioNotThere: --scenario naming no scenario of the run,
// or one it ran that did not fail, is said as such, with the run's
// failing scheduled scenarios; each read as the run having nothing to
// replay.
func TestReplayScenarioNotThere(t *testing.T) {
	dir := mutantRun(t, 1)
	for name, why := range map[string]string{"nope": "no scenario of the run is named so", "race": "no scenario of the run is named so"} {
		code, _, stderr := runCLI(t, "replay", "--scenario", name, dir)
		if code != exitUsage || !strings.Contains(stderr, why) || !strings.Contains(stderr, "failing scheduled scenarios: sched-race") {
			t.Errorf("--scenario %s: exit %d, %q", name, code, stderr)
		}
	}
	out := t.TempDir()
	if code, stdout, stderr := runCLI(t, "check", "--store", "memory", "--scenario", "sched-race", "--out", out); code != exitPass {
		t.Fatalf("check: exit %d\n%s%s", code, stdout, stderr)
	}
	passed, _ := filepath.Glob(filepath.Join(out, "2*"))
	if code, _, stderr := runCLI(t, "replay", "--scenario", "sched-race", passed[0]); code != exitUsage || !strings.Contains(stderr, "it did not fail") {
		t.Errorf("--scenario of a scenario that passed: exit %d, %q", code, stderr)
	}
}
