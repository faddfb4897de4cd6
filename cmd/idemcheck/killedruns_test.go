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
	"github.com/idemcheck/idemcheck/harness/report"
)

// killedRun starts `idemcheck <args> --out <out>` as a process of its
// own and kills it (SIGKILL: nothing runs after it) once its journal
// holds what until waits for. While it runs, it is neither named as
// crashed nor rechecked from under it. It returns the run's directory
// (the one directory of the kind under out) and out.
func killedRun(t *testing.T, kind string, until func(journal string) bool, args ...string) (dir, out string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out = t.TempDir()
	cmd := exec.Command(exe, append(args, "--out", out)...)
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
	}()
	deadline := time.Now().Add(90 * time.Second)
	for {
		dirs, _ := filepath.Glob(filepath.Join(out, "*-"+kind))
		if len(dirs) == 1 {
			dir = dirs[0]
			if b, _ := os.ReadFile(filepath.Join(dir, harness.JournalFile)); until(string(b)) {
				break
			}
		}
		select {
		case err := <-exited:
			exited <- err // for the deferred wait: Fatalf runs it
			t.Fatalf("%v: the run ended before the test killed it (%v, stderr %q)", args, err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: the journal never showed what the test waits for (stderr %q)", args, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := crashedRuns(out); len(got) != 0 {
		t.Errorf("a running %s run taken for a crashed one: %v", kind, got)
	}
	if code, _, stderr := runCLI(t, "recheck", dir); code != exitUsage || !strings.Contains(stderr, "still running") {
		t.Errorf("recheck of a running %s run: exit %d, stderr %q", kind, code, stderr)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	exited <- nil // for the deferred wait
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		t.Fatalf("%v: the run finished before it was killed: nothing to recover", args)
	}
	if got := crashedRuns(out); len(got) != 1 || got[0] != dir {
		t.Errorf("crashed runs %v, want %s", got, dir)
	}
	return dir, out
}

// lines counts the journal's lines that hold want.
func lines(journal, want string) int {
	n := 0
	for _, l := range strings.Split(journal, "\n") {
		if strings.Contains(l, want) {
			n++
		}
	}
	return n
}

// recheckCuts rechecks the journal of dir cut at random byte offsets (a
// line torn anywhere, the first included), each in a run directory of
// its own: each is reported, with exit code want, never a stack trace.
func recheckCuts(t *testing.T, dir string, want int) {
	t.Helper()
	journal, err := os.ReadFile(filepath.Join(dir, harness.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 25; i++ {
		cut := rng.Intn(len(journal) + 1)
		if i == 0 {
			cut = 10 // inside the plan's line
		}
		cdir := filepath.Join(t.TempDir(), filepath.Base(dir))
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(cdir, report.Marker), nil, 0o644)
		if err := os.WriteFile(filepath.Join(cdir, harness.JournalFile), journal[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, "recheck", cdir)
		if code != want || !strings.Contains(stdout, "exit 3: undecided") && want == exitUnknown || strings.Contains(stderr+stdout, "goroutine ") {
			t.Fatalf("the journal cut at byte %d of %d: exit %d, want %d\nstdout:\n%s\nstderr: %s", cut, len(journal), code, want, stdout, stderr)
		}
	}
}

// TestRecheckReportsAKilledMutantsRun: `idemcheck mutants` killed after
// some hunts finished leaves its journal; the next run names it, and
// recheck reports from it every hunt that finished (each kill the
// journal holds is in the matrix) and names those that did not; nothing
// finished proves a failure on the memory store, so the run is undecided
// (exit 3), and its summary is written. A journal cut anywhere is
// reported the same way.
func TestRecheckReportsAKilledMutantsRun(t *testing.T) {
	t.Parallel()
	done := func(j string) bool { return lines(j, `"type":"done"`) >= 6 }
	dir, out := killedRun(t, "mutants", done, "mutants", "--store", "memory", "--seeds", "1-40", "--parallel", "2", "--shrink", "0")
	journal, _ := os.ReadFile(filepath.Join(dir, harness.JournalFile))
	kills := lines(string(journal), `"verdict":"killed"`)

	// The next run names it.
	code, _, stderr := runCLI(t, "mutants", "--store", "memory", "--mutant", "token-reuse", "--out", out)
	if code != exitPass || !strings.Contains(stderr, dir) || !strings.Contains(stderr, "idemcheck recheck "+dir) {
		t.Errorf("the next mutants run: exit %d, it does not name the killed run %s:\n%s", code, dir, stderr)
	}

	code, stdout, stderr := runCLI(t, "recheck", dir)
	if code != exitUnknown || !strings.Contains(stdout, "recovered the mutants run") || !strings.Contains(stdout, "not finished: ") ||
		!strings.Contains(stdout, "never ran: ") || !strings.Contains(stdout, "exit 3: undecided") || strings.Contains(stdout, "SURVIVED") {
		t.Fatalf("recheck of a killed mutants run: exit %d, want 3\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	var sum struct {
		Verdict     string `json:"verdict"`
		Interrupted bool   `json:"interrupted"`
		Recovered   bool   `json:"recovered"`
		Mutants     []struct {
			Name  string `json:"name"`
			Kills int    `json:"kills"`
		} `json:"mutants"`
		Unfinished []struct {
			Mutant string `json:"mutant"`
			Seed   int64  `json:"seed"`
		} `json:"unfinished"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("recheck wrote no readable summary.json: %v", err)
	}
	got := 0
	for _, m := range sum.Mutants {
		got += m.Kills
	}
	if sum.Verdict != "unknown" || !sum.Interrupted || !sum.Recovered || got != kills || len(sum.Unfinished) == 0 {
		t.Errorf("summary: verdict %q, interrupted %v, recovered %v, %d kills (the journal holds %d), %d unfinished",
			sum.Verdict, sum.Interrupted, sum.Recovered, got, kills, len(sum.Unfinished))
	}
	if got := crashedRuns(out); len(got) != 0 {
		t.Errorf("a recovered run still taken for a crashed one: %v", got)
	}
	if code, stdout, _ := runCLI(t, "recheck", dir); code != exitUnknown || !strings.Contains(stdout, "as it was saved") {
		t.Errorf("recheck of the recovered run: exit %d:\n%s", code, stdout)
	}
	recheckCuts(t, dir, exitUnknown)
}

// TestRecheckOfAKilledMutantsRunReportsASurvivor: a mutant that survived
// a finished hunt (its budget too short to kill it) is a failure that
// no hunt left unfinished can undo: recheck of the killed run exits 1 and
// says why.
func TestRecheckOfAKilledMutantsRunReportsASurvivor(t *testing.T) {
	survived := func(j string) bool { return lines(j, `"verdict":"survived"`) >= 1 }
	dir, _ := killedRun(t, "mutants", survived, "mutants", "--store", "memory", "--mutant", "token-reuse", "--seeds", "1-1000",
		"--budget", "1ms", "--parallel", "1", "--shrink", "0")
	code, stdout, stderr := runCLI(t, "recheck", dir)
	if code != exitFail || !strings.Contains(stdout, "exit 1: a finished hunt proves a failure: token-reuse survived") || !strings.Contains(stdout, "never ran: ") {
		t.Fatalf("recheck of a killed run with a survivor: exit %d, want 1\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
}

// TestRecheckReportsAKilledSoak: a soak killed after some seeds ended
// leaves its journal; the next soak names it, and recheck reports the
// seeds that ended (the table counts their runs), the one cut short and
// those never run: undecided on a correct store (exit 3). A journal cut
// anywhere is reported the same way.
func TestRecheckReportsAKilledSoak(t *testing.T) {
	ended := func(j string) bool { return lines(j, `"type":"seed"`) >= 3 }
	dir, out := killedRun(t, "soak", ended, "soak", "--store", "memory", "--scenario", "race,mismatch", "--seeds", "1-500", "--hogs", "0")
	journal, _ := os.ReadFile(filepath.Join(dir, harness.JournalFile))
	seeds := lines(string(journal), `"type":"seed"`)

	code, _, stderr := runCLI(t, "soak", "--store", "memory", "--scenario", "mismatch", "--seeds", "1", "--hogs", "0", "--out", out)
	if code != exitPass || !strings.Contains(stderr, "idemcheck recheck "+dir) {
		t.Errorf("the next soak: exit %d, it does not name the killed soak %s:\n%s", code, dir, stderr)
	}

	code, stdout, stderr := runCLI(t, "recheck", "--json", dir)
	var rep soakReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("recheck --json of a killed soak: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	passed := 0
	for _, r := range rep.Rows {
		passed += r.Pass
	}
	if code != exitUnknown || !rep.Recovered || rep.Ran != seeds || passed != 2*seeds || len(rep.Unfinished) != 500-seeds || rep.Verdict != "unknown" {
		t.Fatalf("recheck of a killed soak: exit %d, recovered %v, %d seeds ran (the journal ended %d), %d passed, %d unfinished, verdict %q",
			code, rep.Recovered, rep.Ran, seeds, passed, len(rep.Unfinished), rep.Verdict)
	}
	code, stdout, _ = runCLI(t, "recheck", dir)
	if code != exitUnknown || !strings.Contains(stdout, "as it was saved") || !strings.Contains(stdout, "never ran: seed") || !strings.Contains(stdout, "exit 3: undecided") {
		t.Errorf("recheck of the recovered soak: exit %d:\n%s", code, stdout)
	}
	recheckCuts(t, dir, exitUnknown)
}

// TestRecheckReportsAKilledRandomFlagsSoak: a random-flag soak's draws
// are numbered in its plan, and each draw runs on a seed drawn for it: the
// draws that ended are counted as ended, not as never run. The report
// once matched the drawn seeds against the draws' numbers and listed
// every draw as never run.
func TestRecheckReportsAKilledRandomFlagsSoak(t *testing.T) {
	t.Parallel()
	ended := func(j string) bool { return lines(j, `"type":"seed"`) >= 3 }
	dir, _ := killedRun(t, "soak", ended, "soak", "--store", "memory", "--random-flags", "--draw-seed", "2", "--budget", "2s", "--seeds", "1-500", "--hogs", "0")
	journal, _ := os.ReadFile(filepath.Join(dir, harness.JournalFile))
	draws := lines(string(journal), `"type":"seed"`)
	code, stdout, stderr := runCLI(t, "recheck", "--json", dir)
	var rep soakReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("recheck --json of a killed soak: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	if code != exitUnknown || rep.Ran != draws || len(rep.Unfinished) != 500-draws {
		t.Fatalf("recheck of a killed random-flag soak: exit %d, %d draws ran (the journal ended %d), %d unfinished, want %d",
			code, rep.Ran, draws, len(rep.Unfinished), 500-draws)
	}
	for _, u := range rep.Unfinished {
		if u.Seed <= int64(draws) { // draws end in the plan's order
			t.Errorf("draw %d ended, and the report lists it as unfinished", u.Seed)
		}
	}
}

// TestRecheckReportsAKilledMutateRun: `idemcheck mutate` killed once
// some mutants have their verdicts leaves its journal; the next run
// names it, and recheck reports every verdict the journal holds, the
// correct store's runs, and the mutants not judged, never as survivors:
// undecided (exit 3), with its summary written. A journal cut anywhere
// is reported the same way.
func TestRecheckReportsAKilledMutateRun(t *testing.T) {
	done := func(j string) bool { return lines(j, `"type":"done"`) >= 3 }
	dir, out := killedRun(t, "mutate", done, "mutate", "--store", "sqlite", "--scenario", "sched-race,sched-takeover",
		"--quick", "1m", "--budget", "0", "--episodes", "4", "--workers", "1")
	journal, _ := os.ReadFile(filepath.Join(dir, harness.JournalFile))
	verdicts := lines(string(journal), `"type":"done"`)
	survivors := lines(string(journal), `"verdict":"survived"`) // each one's run ended: a survivor (the weakened settings, on these scenarios)

	code, _, stderr := runCLI(t, "mutants", "--store", "memory", "--mutant", "token-reuse", "--out", out)
	if code != exitPass || !strings.Contains(stderr, "idemcheck recheck "+dir) {
		t.Errorf("the next run: exit %d, it does not name the killed run %s:\n%s", code, dir, stderr)
	}

	code, stdout, stderr := runCLI(t, "recheck", dir)
	if code != exitUnknown || !strings.Contains(stdout, "recovered the mutate run") || !strings.Contains(stdout, "sched-race       pass") ||
		!strings.Contains(stdout, "not judged: ") || !strings.Contains(stdout, "exit 3: undecided") || strings.Count(stdout, "\n  survived ") != survivors {
		t.Fatalf("recheck of a killed mutate run: exit %d, want 3\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	var sum struct {
		Interrupted bool `json:"interrupted"`
		Recovered   bool `json:"recovered"`
		Killed      int  `json:"killed"`
		Survived    int  `json:"survived"`
		Equivalent  int  `json:"equivalent"`
		NotJudged   int  `json:"interrupted_mutants"`
		Mutants     []struct {
			Verdict string `json:"verdict"`
		} `json:"mutants"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("recheck wrote no readable summary.json: %v", err)
	}
	if !sum.Interrupted || !sum.Recovered || sum.Killed+sum.Survived+sum.Equivalent != verdicts || sum.Survived != survivors ||
		sum.NotJudged != len(sum.Mutants)-verdicts || sum.NotJudged == 0 {
		t.Errorf("summary: interrupted %v, recovered %v, %d killed, %d survived, %d equivalent (the journal holds %d verdicts), %d not judged of %d",
			sum.Interrupted, sum.Recovered, sum.Killed, sum.Survived, sum.Equivalent, verdicts, sum.NotJudged, len(sum.Mutants))
	}
	if code, stdout, _ := runCLI(t, "recheck", dir); code != exitUnknown || !strings.Contains(stdout, "as it was saved") {
		t.Errorf("recheck of the recovered run: exit %d:\n%s", code, stdout)
	}
	recheckCuts(t, dir, exitUnknown)
}

// TestOutHoldingAKilledRun: a run directory named by --out (idemcheck
// http's) that holds a run whose process died is moved aside, journal
// and all, and named with its recheck line, before a new run takes the
// name; one whose run still writes its journal is refused; one that
// finished and did not pass is moved aside too; an empty or passing one
// is left to the new run.
func TestOutHoldingAKilledRun(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	j, err := harness.CreateJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	if err := keepKilledRun(dir, &w); err == nil || !strings.Contains(err.Error(), "a run is writing there now") {
		t.Fatalf("a run still writing: %v", err)
	}
	j.Note("", "test", map[string]int{"calls": 1})
	j.Close() // as the kernel drops a dead process's lock
	if err := keepKilledRun(dir, &w); err != nil {
		t.Fatal(err)
	}
	moved, _ := filepath.Glob(dir + ".killed-*")
	if len(moved) != 1 || !strings.Contains(w.String(), "idemcheck recheck "+moved[0]) {
		t.Fatalf("moved %v, said %q", moved, w.String())
	}
	if b, err := os.ReadFile(filepath.Join(moved[0], harness.JournalFile)); err != nil || len(b) == 0 {
		t.Fatalf("the killed run's journal was not kept: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the name was not freed: %v", err)
	}
	// Finished (its summary written) or never used: the new run's.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w.Reset()
	if err := keepKilledRun(dir, &w); err != nil || w.Len() != 0 {
		t.Fatalf("an empty --out: %v, said %q", err, w.String())
	}
	write := func(summary string) {
		for f, text := range map[string]string{harness.JournalFile: "{}\n", "summary.json": summary} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(`{"pass":true,"run":{}}`)
	if err := keepKilledRun(dir, &w); err != nil || w.Len() != 0 {
		t.Fatalf("a passing run's --out: %v, said %q", err, w.String())
	}
	// A finished run that did not pass (a failure, undecided, cut short,
	// or a killed run once rechecked) is moved aside too: its evidence.
	for _, summary := range []string{`{"pass":false,"run":{}}`, `{"pass":true,"run":{"interrupted":"during the load"}}`} {
		write(summary)
		w.Reset()
		if err := keepKilledRun(dir, &w); err != nil || !strings.Contains(w.String(), "did not pass") {
			t.Fatalf("%s: %v, said %q", summary, err, w.String())
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: the name was not freed: %v", summary, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // the next aside's name, by the time
	}
	if kept, _ := filepath.Glob(dir + ".kept-*"); len(kept) != 2 {
		t.Errorf("kept %v, want the two runs that did not pass", kept)
	}
}
