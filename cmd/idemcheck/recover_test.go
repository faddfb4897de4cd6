package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/report"
)

// TestRecheckRecoversAKilledRun: a check whose process is killed
// (SIGKILL: nothing runs after it) leaves its journal, and recheck
// reports the run from it: undecided, never a failure of the correct
// store, the scenarios that finished with their verdicts, the one cut
// short judged on what it recorded, the rest listed as never run, in
// summary.json, report.md and report.html. Until then the next check
// names it (crashedRuns), and never a run still running.
func TestRecheckRecoversAKilledRun(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(exe, "check", "--store", "sqlite", "--out", out)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once the journal shows some scenarios passed.
	var dir string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		dirs, _ := filepath.Glob(filepath.Join(out, "2*"))
		if len(dirs) == 1 {
			dir = dirs[0]
			if b, _ := os.ReadFile(filepath.Join(dir, harness.JournalFile)); passedLines(string(b)) >= 2 {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Running, it holds its journal: not taken for a crashed run.
	if got := crashedRuns(out); len(got) != 0 {
		t.Errorf("a running run taken for a crashed one: %v", got)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if dir == "" {
		t.Fatal("the run made no results directory")
	}
	// Dead, it is: the next check names it. The lock goes with the last
	// reference to the journal's open file, and a child the run was
	// starting as it died (a worker process, between fork and exec) may
	// hold one for a moment: once, under make test's load, the journal
	// was still held right after Wait. A few seconds allow for that; a
	// live holder would keep it for good.
	got := crashedRuns(out)
	for wait := time.Now().Add(5 * time.Second); len(got) == 0 && time.Now().Before(wait); got = crashedRuns(out) {
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != 1 || got[0] != dir {
		t.Errorf("crashed runs %v, want %s", got, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		t.Fatal("the run finished before it was killed: nothing to recover")
	}

	// A file a write killed midway left beside its target (a report,
	// 1.7 MB, after a second interrupt) goes with the recheck.
	torn := filepath.Join(dir, ".report.html.370940764")
	if err := os.WriteFile(torn, []byte("<html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "recheck", dir)
	if _, err := os.Stat(torn); err == nil {
		t.Errorf("recheck left %s behind", torn)
	}
	if code != exitUnknown {
		t.Fatalf("recheck of a killed run of the correct store: exit %d, want 3 (undecided)\nstdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "recovered") || !strings.Contains(stdout, "ended before the run finished") {
		t.Errorf("the summary does not say the run was recovered:\n%s", stdout)
	}
	// What finished, what was cut and what never ran, as an interrupted
	// run says it: the scenarios never run were in its files only.
	if !strings.Contains(stdout, "INTERRUPTED: ") || !strings.Contains(stdout, " never ran (") {
		t.Errorf("the summary does not list what finished and what never ran:\n%s", stdout)
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatalf("recheck wrote no summary.json: %v", err)
	}
	var sum struct {
		Verdict     string   `json:"verdict"`
		Interrupted bool     `json:"interrupted"`
		Stopped     string   `json:"stopped"`
		NotRun      []string `json:"not_run"`
		Scenarios   []struct {
			Name    string `json:"name"`
			Verdict string `json:"verdict"`
			Ops     int    `json:"ops"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != "unknown" || !sum.Interrupted || sum.Stopped != harness.Crashed {
		t.Errorf("summary: verdict %s, interrupted %v, stopped %q", sum.Verdict, sum.Interrupted, sum.Stopped)
	}
	passed, ops := 0, 0
	for _, s := range sum.Scenarios {
		if s.Verdict == "fail" {
			t.Errorf("%s failed on the correct store after recovery", s.Name)
		}
		if s.Verdict == "pass" {
			passed++
		}
		ops += s.Ops
	}
	if passed < 2 || ops == 0 || len(sum.NotRun) == 0 {
		t.Errorf("recovered %d passed scenarios, %d calls, %d never run: want the finished ones, their calls and the rest", passed, ops, len(sum.NotRun))
	}
	for _, f := range []string{"report.md", "report.html", "history.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("recheck wrote no %s: %v", f, err)
			continue
		}
		if f != "history.jsonl" && !strings.Contains(string(b), "ended before the run finished") {
			t.Errorf("%s does not say the run's process ended", f)
		}
	}
	if got := crashedRuns(out); len(got) != 0 {
		t.Errorf("a recovered run still taken for a crashed one: %v", got)
	}
	// Recovered, it is a run like any other: recheck judges it again,
	// still cut short: undecided, and said so, never a PASS; and it
	// names the build that made it, from its journal.
	if code, stdout, _ := runCLI(t, "recheck", dir); code != exitUnknown || strings.Contains(stdout, "(changed)") ||
		strings.Contains(stdout, "PASS") || !strings.Contains(stdout, "UNKNOWN") || !strings.Contains(stdout, "INTERRUPTED") ||
		strings.Contains(stdout, "made by unknown") {
		t.Errorf("recheck of the recovered run: exit %d\n%s", code, stdout)
	}
}

// passedLines counts the results of passed scenarios in a journal.
func passedLines(journal string) int {
	n := 0
	for _, l := range strings.Split(journal, "\n") {
		if strings.Contains(l, `"type":"result"`) && strings.Contains(l, `"verdict":"pass"`) {
			n++
		}
	}
	return n
}

// TestRecheckOfARunKilledAsItStarted: a run killed before its journal's
// first line was out (an empty journal), or stopped while it started
// before it made one (idemcheck http while its service started), is
// reported as what it is, undecided with nothing run (exit 3), where
// recheck said it was no run's journal (exit 2), though the next run
// had named it for recheck.
func TestRecheckOfARunKilledAsItStarted(t *testing.T) {
	for name, journal := range map[string]string{"empty journal": "", "torn first line": `{"scenario":"","type":"ru`, "no journal": "-"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, report.Marker), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if journal != "-" {
			if err := os.WriteFile(filepath.Join(dir, harness.JournalFile), []byte(journal), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if code, stdout, stderr := runCLI(t, "recheck", dir); code != exitUnknown || !strings.Contains(stdout, "nothing ran") {
			t.Errorf("%s: exit %d, want 3:\n%s%s", name, code, stdout, stderr)
		}
	}
}

// TestRecheckOfACutHistory: a finished run whose history.jsonl was cut
// at a line's end (a copy cut short) is not judged as the run's: it
// passed with half the evidence, or failed with charges cut off. Recheck
// says the file is not the whole run's, exit 2.
func TestRecheckOfACutHistory(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if code, stdout, stderr := runCLI(t, "check", "--store", "memory", "--scenario", "race,crash", "--out", out); code != exitPass {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	dir := filepath.Join(out, "latest")
	if code, stdout, stderr := runCLI(t, "recheck", dir); code != exitPass {
		t.Fatalf("recheck of the whole run: exit %d:\n%s%s", code, stdout, stderr)
	}
	hist := filepath.Join(dir, "history.jsonl")
	whole, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	cutHistory(t, dir)
	if code, stdout, stderr := runCLI(t, "recheck", dir); code != exitUsage || !strings.Contains(stderr, "not the whole run's") ||
		!strings.Contains(stderr, "the run's own verdict, given when it ended on its whole history (summary.json): PASS") {
		t.Errorf("recheck of a cut history: exit %d, want 2:\n%s%s", code, stdout, stderr)
	}
	// Cut inside a line: said as such, with the run's own verdict, not
	// only "unexpected end of JSON input".
	mid := bytes.LastIndexByte(whole[:len(whole)/2], '\n') + 10 // ten bytes into a line
	if err := os.WriteFile(hist, whole[:mid], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCLI(t, "recheck", dir); code != exitUsage || !strings.Contains(stderr, "is cut short (the file ends inside it") ||
		!strings.Contains(stderr, "(summary.json): PASS") {
		t.Errorf("recheck of a history cut inside a line: exit %d, want 2:\n%s%s", code, stdout, stderr)
	}
}

// TestRecheckInterruptedWhileLoading: an interrupt while recheck loads a
// run's history stops it there, undecided (exit 3), the run's files as
// they were: loading a history of gigabytes went on deaf to it.
func TestRecheckInterruptedWhileLoading(t *testing.T) {
	dir := passedRaceRun(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"recheck", dir}, &stdout, &stderr); code != exitUnknown || !strings.Contains(stdout.String(), "interrupted while") {
		t.Fatalf("recheck interrupted while loading: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "history.jsonl")); err != nil {
		t.Errorf("the run's history: %v", err)
	}
}

// TestRecheckOfAJournalBrokenMidway: a killed run's journal with a line
// broken before its last (a write a full disk cut short, then more lines
// once it was freed) is recovered up to that line, as if the run had
// died there, saying how many lines it left out: recheck refused it
// ("journal line 3: …", exit 2), and the run was lost.
func TestRecheckOfAJournalBrokenMidway(t *testing.T) {
	t.Parallel()
	ran := func(j string) bool { return lines(j, `"type":"result"`) >= 1 }
	dir, _ := killedRun(t, "memory-correct", ran, "check", "--store", "memory", "--scenario", "race,crash,mismatch,error,takeover", "--duration", "3s", "--parallel", "1")
	path := filepath.Join(dir, harness.JournalFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.SplitAfter(string(raw), "\n")
	if len(ls) < 10 {
		t.Fatalf("a journal of %d lines", len(ls))
	}
	ls[5] = ls[5][:len(ls[5])/2] + "\n"
	if err := os.WriteFile(path, []byte(strings.Join(ls, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "recheck", dir)
	if code != exitUnknown || !strings.Contains(stdout+stderr, "read up to its line 6, which is not whole") {
		t.Fatalf("recheck of a journal broken at line 6: exit %d, want 3, saying where it was read to:\n%s%s", code, stdout, stderr)
	}
}

// TestRecheckOfARunWithoutItsSummary: a finished run whose summary.json
// was deleted holds its history and reports: recheck says the summary is
// missing (exit 2), where it said the run had recorded nothing.
func TestRecheckOfARunWithoutItsSummary(t *testing.T) {
	dir := passedRaceRun(t)
	if err := os.Remove(filepath.Join(dir, "summary.json")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "recheck", dir)
	if code != exitUsage || !strings.Contains(stderr, "has no summary.json but holds history.jsonl") || strings.Contains(stdout, "nothing ran") {
		t.Fatalf("recheck of a run without its summary: exit %d\n%s%s", code, stdout, stderr)
	}
}

// passedRaceRun runs the race scenario on the memory store, which passes,
// and returns its run directory.
func passedRaceRun(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	if code, stdout, stderr := runCLI(t, "check", "--store", "memory", "--scenario", "race", "--out", out); code != exitPass {
		t.Fatalf("check: exit %d\n%s%s", code, stdout, stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "2*"))
	if len(dirs) != 1 {
		t.Fatalf("run dirs %v", dirs)
	}
	return dirs[0]
}

// TestRecheckOfARunThatWroteOnlyItsPages: a soak's seed run on a full
// disk wrote its trace and page but neither its journal nor its summary,
// and its last word (ended.json) stayed the blank it reserved: recheck
// says it got as far as writing its files (exit 2), where it said the
// run recorded nothing beside a failed seed's trace. A directory with
// only its marker and blank last word still recorded nothing (exit 3).
func TestRecheckOfARunThatWroteOnlyItsPages(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{report.Marker: "", report.EndFile: strings.Repeat(" ", 4096)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, stdout, _ := runCLI(t, "recheck", dir); code != exitUnknown || !strings.Contains(stdout, "nothing ran") {
		t.Fatalf("a run that recorded nothing: exit %d\n%s", code, stdout)
	}
	// A black-box run whose service never started left its instances'
	// logs, empty: it recorded nothing still (it read as a finished run
	// that lost its summary).
	for _, log := range []string{"i1.log", "i2.log"} {
		if err := os.WriteFile(filepath.Join(dir, log), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, stdout, stderr := runCLI(t, "recheck", dir); code != exitUnknown || !strings.Contains(stdout, "nothing ran") {
		t.Fatalf("an http run whose service never started: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "trace-race.txt"), []byte("client 1 ..."), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "recheck", dir)
	if code != exitUsage || !strings.Contains(stderr, "holds trace-race.txt") || strings.Contains(stdout, "nothing ran") {
		t.Fatalf("a run that wrote its trace only: exit %d\n%s%s", code, stdout, stderr)
	}
}
