package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMutantsJSON: the matrix as JSON, with the fields CI reads, for a few
// mutants of each kind on the memory store.
func TestMutantsJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "mutants", "--store", "memory", "--json", "--mutant", "token-reuse,blind-takeover,no-key", "--out", t.TempDir())
	if code != exitPass {
		t.Fatalf("exit %d, stderr %q, stdout %s", code, stderr, stdout)
	}
	var rep struct {
		Store   string `json:"store"`
		Mutants []struct {
			Name    string   `json:"name"`
			Side    string   `json:"side"`
			Killed  bool     `json:"killed"`
			Checker string   `json:"checker"`
			Seconds *float64 `json:"seconds"`
			Trace   []string `json:"trace"`
		} `json:"mutants"`
		Correct struct {
			Verdict string `json:"verdict"`
		} `json:"correct"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, stdout)
	}
	if rep.Store != "memory" || len(rep.Mutants) != 3 || rep.Correct.Verdict != "pass" {
		t.Fatalf("store %q, %d mutants, correct %q", rep.Store, len(rep.Mutants), rep.Correct.Verdict)
	}
	for _, m := range rep.Mutants {
		if !m.Killed || m.Checker == "" || m.Seconds == nil || len(m.Trace) == 0 {
			t.Errorf("%s: killed %v, checker %q, seconds %v, %d trace lines", m.Name, m.Killed, m.Checker, m.Seconds, len(m.Trace))
		}
	}
	if rep.Mutants[2].Side != "client" || rep.Mutants[0].Side != "store" {
		t.Errorf("sides: %q %q", rep.Mutants[0].Side, rep.Mutants[2].Side)
	}
}

// TestMutantsText: the printed matrix names each mutant, its verdict and
// checker, the correct store's verdict and a trace.
func TestMutantsText(t *testing.T) {
	code, stdout, _ := runCLI(t, "mutants", "--store", "memory", "--mutant", "select-then-insert,no-fingerprint", "--out", t.TempDir())
	if code != exitPass {
		t.Fatalf("exit %d: %s", code, stdout)
	}
	for _, want := range []string{"select-then-insert", "no-fingerprint", "killed", "mismatch", "correct store on the same scenarios: PASS",
		"shortest traces:", "Begin(fp=", "PASS: 2 of 2 mutants killed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestMutantsAndDemoBadUsage: bad input is one line on stderr, exit 2.
func TestMutantsAndDemoBadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mutants", "--store", "mongo"}, "unknown store"},
		{[]string{"mutants", "--store", "memory", "--seeds", "0"}, "--seeds"},
		{[]string{"mutants", "--store", "memory", "--mutant", "nope"}, "no mutant"},
		{[]string{"mutants", "--store", "memory", "--budget", "0s"}, "--budget"},
		{[]string{"mutants", "extra"}, "unexpected argument"},
		{[]string{"demo"}, "name a mutant"},
		{[]string{"demo", "nope"}, "no mutant"},
		{[]string{"demo", "split-claim", "--store", "memory"}, "try --store redis"},
		{[]string{"demo", "select-then-insert", "--store", "mongo"}, "unknown store"},
	} {
		code, stdout, stderr := runCLI(t, c.args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want one line with %q)", c.args, code, stdout, stderr, c.want)
		}
	}
	for _, args := range [][]string{{"mutants", "--help"}, {"demo", "--help"}, {"help", "mutants"}} {
		if code, stdout, _ := runCLI(t, args...); code != exitPass || !strings.Contains(stdout, "Usage") {
			t.Errorf("%v: exit %d, %q", args, code, stdout)
		}
	}
}

// TestDemo: the demo names the statements each client ran, shows the
// double charge on the mutant and none on the correct store.
func TestDemo(t *testing.T) {
	code, stdout, stderr := runCLI(t, "demo", "select-then-insert", "--store", "memory")
	if code != exitPass {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"mutant (select-then-insert):", "lock; read rows[key]; unlock", "→ no row",
		"POST /charges (provider)", "DOUBLE CHARGE: order o000 charged 2 times",
		"correct store, same schedule", "in-flight (409)", "replay of 201", "no harm: order o000 charged once"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "\n"); n > 90 { // each step: its switch, its statement, the row after it

		t.Errorf("demo is %d lines: too long to read in a terminal", n)
	}
	code, stdout, _ = runCLI(t, "demo", "token-reuse", "--store", "sqlite")
	if code != exitPass {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"INSERT INTO idempotency_keys", "DELETE FROM idempotency_keys", "handed out twice", "no harm"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("sqlite demo lacks %q:\n%s", want, stdout)
		}
	}
}

// TestCheckClientVariant: a client-side mutant is a variant of check: the
// correct store, with the workload's mistake, caught by its scenario.
func TestCheckClientVariant(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results")
	code, stdout, stderr := runCLI(t, "check", "--store", "memory", "--variant", "key-per-try", "--scenario", "retry-after-charge",
		"--keys", "2", "--json", "--out", out)
	if code != exitFail {
		t.Fatalf("exit %d, want 1: %s %s", code, stderr, stdout)
	}
	var sum struct {
		Variant    string `json:"variant"`
		Violations []struct {
			Checker string `json:"checker"`
		} `json:"violations"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Variant != "key-per-try" || len(sum.Violations) == 0 || sum.Violations[0].Checker != "at-most-once" {
		t.Errorf("variant %q, violations %+v", sum.Variant, sum.Violations)
	}
	code, stdout, _ = runCLI(t, "list")
	if code != exitPass || !strings.Contains(stdout, "release-on-error-unkeyed") || !regexp.MustCompile(`top-hop-only +client +all +crash +at-most-once`).MatchString(stdout) {
		t.Errorf("list does not show the client-side variants (exit %d)", code)
	}
}

// TestMutantsOfAnExecStore: mutants and mutate given a store in another
// language say, in one line, how to check its bug variants instead.
func TestMutantsOfAnExecStore(t *testing.T) {
	for _, args := range [][]string{{"mutants", "--cmd", "python3 store.py"}, {"mutants", "--store", "exec"},
		{"mutate", "--cmd", "python3 store.py"}, {"mutate", "--store", "exec"}} {
		code, _, stderr := runCLI(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "check --store exec --cmd") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestMutantsInterruptSaysSo: an interrupted hunt says so on stdout, not
// only in its exit code (3), and never reads as a pass or a failure.
func TestMutantsInterruptSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var so, se bytes.Buffer
	code := run(ctx, []string{"mutants", "--store", "memory", "--seeds", "1-200", "--out", t.TempDir()}, &so, &se)
	if code != exitUnknown || !strings.Contains(so.String(), "INTERRUPTED: ") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr: %s", code, so.String(), se.String())
	}
}
