package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/report"
)

// TestARunThatCouldNotWriteIsNotADeadOne: a check whose files cannot be
// written (here a file-size limit, `ulimit -f`, which fails writes as a
// full disk does, and which Go's runtime does not die of) keeps its
// verdict and exit code, and leaves its last word (report.EndFile) in
// the room made for it at the start: the next run and recheck then say
// that it finished, with its verdict and why its files are missing, and
// never that its process died. Without the word, its journal, stopped
// where the limit was, read as a dead run's.
func TestARunThatCouldNotWriteIsNotADeadOne(t *testing.T) {
	out := t.TempDir()
	// 150 KiB: below what the run's journal and history need, above its
	// last word.
	stdout, stderr := limitedCLI(t, 300, "check", "--store", "memory", "--scenario", "race,mismatch,abuse", "--out", out)
	if !strings.Contains(stdout, "PASS") || !strings.Contains(stderr, "file too large") {
		t.Fatalf("want a PASS whose files could not be written\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "2*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v, want one", dirs)
	}
	dir := dirs[0]
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		t.Fatal("summary.json written: the limit did not bite, nothing is tested")
	}
	e, ok := report.ReadEnded(dir)
	if !ok || e.Verdict != "pass" || len(e.Unwritten) == 0 {
		t.Fatalf("last word %+v, %v: want the run's pass and why its files are missing", e, ok)
	}

	// The next run does not call it dead, and says what it is.
	if got := crashedRuns(out); len(got) != 0 {
		t.Errorf("a run that finished taken for a dead one: %v", got)
	}
	var said bytes.Buffer
	sayCrashed(&said, out)
	if s := said.String(); !strings.Contains(s, "finished") || !strings.Contains(s, "(PASS)") || strings.Contains(s, "died") {
		t.Errorf("the next run says:\n%s", s)
	}

	// recheck reports it from its journal as a run that finished: its
	// verdict then, and what the journal holds judged now (cut where the
	// limit stopped it: undecided, never a failure).
	code, rout, rerr := runCLI(t, "recheck", dir)
	if code != exitUnknown && code != exitPass {
		t.Fatalf("recheck: exit %d\nstdout:\n%s\nstderr:\n%s", code, rout, rerr)
	}
	if !strings.Contains(rout, "the run finished at") || !strings.Contains(rout, "(PASS)") || strings.Contains(rout, harness.Crashed) {
		t.Errorf("recheck does not say the run finished:\n%s", rout)
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatalf("recheck wrote no summary.json: %v", err)
	}
	var sum struct {
		Verdict string `json:"verdict"`
		Stopped string `json:"stopped"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Verdict == "fail" || !strings.Contains(sum.Stopped, "could not write its files") {
		t.Errorf("recovered summary: verdict %s, stopped %q", sum.Verdict, sum.Stopped)
	}
	if _, ok := report.ReadEnded(dir); ok {
		t.Error("the last word stays once the run's files are written")
	}
}

// TestABlackBoxRunThatCouldNotWrite: an http run whose files cannot be
// written (the same file-size limit, on idemcheck alone: the service
// writes no file) keeps its verdict and exit code, where it used to exit
// 2 as a broken setup, and leaves its last word; recheck then reports
// the run from its journal as one that finished, not one that died.
func TestABlackBoxRunThatCouldNotWrite(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	args := []string{"http", "--cmd", serviceCmd(t, "strict", cliEnv+"="), // the service is this test binary too, as a test
		"--instances", "1", "--duration", "3s", "--settle", "1s",
		"--process-faults=false", "-H", "Authorization: Bearer s3cret", "--body-type", "form", "--body", "currency=EUR",
		"--order-at", "ref", "--amount-at", "cents", "--out", out}
	_, stderr := limitedCLI(t, 100, args...)
	if _, err := os.Stat(filepath.Join(out, "summary.json")); err == nil {
		t.Fatal("summary.json written: the limit did not bite, nothing is tested")
	}
	if e, ok := report.ReadEnded(out); !ok || e.Verdict != "PASS" {
		t.Fatalf("last word %+v, %v: want the run's PASS\nstderr:\n%s", e, ok, stderr)
	}
	code, rout, rerr := runCLI(t, "recheck", out)
	if code == exitFail || code == exitUsage || !strings.Contains(rout, "the run finished at") || strings.Contains(rout, "process died") {
		t.Errorf("recheck: exit %d\nstdout:\n%s\nstderr:\n%s", code, rout, rerr)
	}
}

// limitedCLI runs this binary as the CLI with args, in a process whose
// files may not grow past blocks of 512 bytes (dash's `ulimit -f`), and
// fails t unless it exits 0: the verdict a passing run stands on.
func limitedCLI(t *testing.T, blocks int, args ...string) (stdout, stderr string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -f %d && exec "$0" "$@"`, blocks), exe}, args...)...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s under a file-size limit: %v (the verdict stands: want exit 0)\nstdout:\n%s\nstderr:\n%s", args[0], err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}
