package main

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/httpfault"
)

// killedHTTPRun starts `idemcheck http` against the test service mode
// as a process of its own, kills it (SIGKILL: nothing runs after it)
// once its journal holds a line that until says is there, and returns
// the run's directory (under root) and its root.
func killedHTTPRun(t *testing.T, mode string, env []string, until func(journal string) bool, args ...string) (dir, root string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root = t.TempDir()
	dir = filepath.Join(root, "run")
	// The service is this test binary too, as a test (cliEnv cleared).
	cmd := exec.Command(exe, append([]string{"http", "--cmd", serviceCmd(t, mode, append(env, cliEnv+"=")...), "--instances", "1", "--duration", "60s",
		"--clients", "4", "--out", dir, "--seed", "3"}, args...)...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
		httpfault.Reap() // the instances the killed run left running
	}()
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(dir, harness.JournalFile))
		if until(string(b)) {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s: the run ended before the test killed it (%v, stderr %q)", mode, err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the journal never showed what the test waits for (stderr %q):\n%.2000s", mode, stderr.String(), b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Running, it holds its journal: neither named as crashed nor
	// recovered from under it.
	if got := crashedRuns(root); len(got) != 0 {
		t.Errorf("a running black-box run taken for a crashed one: %v", got)
	}
	if code, _, stderr := runCLI(t, "recheck", dir); code != exitUsage || !strings.Contains(stderr, "still running") {
		t.Errorf("recheck of a running run: exit %d, stderr %q", code, stderr)
	}
	return dir, root
}

// TestHTTPRecheckRecoversAKilledRun: `idemcheck http` killed in the
// middle of its load leaves its journal; the next run's check names it,
// and recheck reports it from there: what was recorded is judged, a
// violation in it stands (exit 1), liveness is not judged, and a correct
// service's run is undecided (exit 3), never a failure. The report,
// history and summary are written as a finished run's, and recheck then
// judges the recovered run again the same way.
func TestHTTPRecheckRecoversAKilledRun(t *testing.T) {
	t.Parallel()
	answered := func(j string) bool { return strings.Count(j, `"type":"exchange"`) >= 40 }
	dir, root := killedHTTPRun(t, "strict", nil, answered, "--process-faults=false", "-H", "Authorization: Bearer s3cret",
		"--body-type", "form", "--body", "currency=EUR", "--order-at", "ref", "--amount-at", "cents")
	if got := crashedRuns(root); len(got) != 1 || got[0] != dir {
		t.Errorf("crashed runs %v, want %s", got, dir)
	}
	// Wherever the journal ends (a kill lands anywhere, a line torn
	// included), what it holds is a history of a correct service: no cut
	// fails it.
	journal, err := os.ReadFile(filepath.Join(dir, harness.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	first := bytes.IndexByte(journal, '\n') + 1
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 25; i++ {
		cut := first + rng.Intn(len(journal)-first+1)
		cdir := filepath.Join(t.TempDir(), "cut")
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cdir, harness.JournalFile), journal[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		if code, stdout, stderr := runCLI(t, "recheck", cdir); code != exitUnknown {
			t.Fatalf("the journal cut at byte %d of %d: exit %d, want 3\nstdout:\n%s\nstderr: %s", cut, len(journal), code, stdout, stderr)
		}
	}
	code, stdout, stderr := runCLI(t, "recheck", dir)
	if code != exitUnknown || !strings.Contains(stdout, "recovered the black-box run") || !strings.Contains(stdout, "UNDECIDED liveness") ||
		!strings.Contains(stdout, "PASS at-most-once") || strings.Contains(stdout, "FAIL") ||
		!strings.Contains(stdout, "final probes: none ran") || !strings.HasSuffix(stdout, "\nUNDECIDED: no violation, but not everything was judged (the \"not judged\" lines above)\n") {
		t.Fatalf("recheck of a killed run of a correct service: exit %d, want 3\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatalf("recheck wrote no summary.json: %v", err)
	}
	var sum struct {
		Pass      bool `json:"pass"`
		Undecided bool `json:"undecided"`
		Requests  int  `json:"requests"`
		Run       struct {
			Interrupted string `json:"interrupted"`
		} `json:"run"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Pass || !sum.Undecided || sum.Requests < 40 || !strings.Contains(sum.Run.Interrupted, "its process died") {
		t.Errorf("summary: pass %v, undecided %v, %d requests, interrupted %q", sum.Pass, sum.Undecided, sum.Requests, sum.Run.Interrupted)
	}
	for _, f := range []string{"report.txt", "report.html", "history.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("recheck wrote no %s: %v", f, err)
		}
	}
	if got := crashedRuns(root); len(got) != 0 {
		t.Errorf("a recovered run still taken for a crashed one: %v", got)
	}
	if code, stdout, _ := runCLI(t, "recheck", dir); code != exitUnknown || strings.Contains(stdout, "(changed)") {
		t.Errorf("recheck of the recovered run: exit %d:\n%s", code, stdout)
	}

	// lock423 does not fingerprint: once a reused key got a success, the
	// violation is in the journal, and it stands after the kill.
	reused := func(j string) bool {
		for _, l := range strings.Split(j, "\n") {
			if strings.Contains(l, `"type":"exchange"`) && strings.Contains(l, `"purpose":"reuse"`) && strings.Contains(l, `"status":20`) {
				return true
			}
		}
		return false
	}
	dir, _ = killedHTTPRun(t, "lock423", []string{"IDEM_TEST_DIR=" + t.TempDir()}, reused, "--process-faults=false", "--net-faults=false",
		"--provider-fail", "0")
	code, stdout, _ = runCLI(t, "recheck", dir)
	if code != exitFail || !strings.Contains(stdout, "FAIL status-codes") || !strings.Contains(stdout, "UNDECIDED liveness") {
		t.Errorf("recheck of a killed run with a violation: exit %d, want 1:\n%s", code, stdout)
	}
}
