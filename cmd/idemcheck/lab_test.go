package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestLabJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "lab", "--store", "memory", "--orders", "40", "--seed", "2", "--json")
	if code != exitPass {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var r struct {
		Seed    int64  `json:"seed"`
		Orders  int    `json:"orders"`
		Verdict string `json:"verdict"` // as check's, soak's and mutate's

		Versions []struct {
			Name          string `json:"name"`
			Charges       int    `json:"charges"`
			DoubleCharged int    `json:"double_charged"`
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if r.Seed != 2 || r.Orders != 40 || len(r.Versions) != 3 || r.Verdict != "pass" {
		t.Fatalf("got %+v", r)
	}
	names := []string{"no-key", "key-per-try", "same-key"}
	for i, v := range r.Versions {
		if v.Name != names[i] {
			t.Errorf("version %d is %q, want %q", i, v.Name, names[i])
		}
	}
	if nk, sk := r.Versions[0], r.Versions[2]; nk.Charges <= 40 || nk.DoubleCharged == 0 || sk.Charges != 40 || sk.DoubleCharged != 0 {
		t.Errorf("not the card's shape: %+v", r.Versions)
	}
}

func TestLabTable(t *testing.T) {
	code, stdout, stderr := runCLI(t, "lab", "--store", "memory", "--orders", "30", "--seeds", "1-2")
	if code != exitPass {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"no-key", "key-per-try", "same-key", "do not compare with this run; its claim is the shape", "SHAPE HOLDS on seeds 1-2", "Not judged here: the lab's clients retry one order at a time"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "132") || strings.Contains(stdout, "card (npm") {
		t.Errorf("the card's figures (100 orders) beside a run of 30 orders:\n%s", stdout)
	}
	// Seeds 1-2 with the card's 100 orders: the figures beside seed 1 only,
	// with the line on why the counts differ.
	code, stdout, stderr = runCLI(t, "lab", "--store", "memory", "--seeds", "2")
	if code != exitPass {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if n := strings.Count(stdout, "  132   24"); n != 2 || !regexp.MustCompile(`(?m)^\s+1\s+same-key\s+100\s+0\s+100\s+0$`).MatchString(stdout) ||
		regexp.MustCompile(`(?m)^ +2 +same-key +\d+ +\d+ +\d+`).MatchString(stdout) || !strings.Contains(stdout, "random source") {
		t.Errorf("the card's figures must sit beside seed 1's rows only, with why the counts differ:\n%s", stdout)
	}
	if n := len(regexp.MustCompile(`(?m)^\s+\d+\s+same-key\s+\d+`).FindAllString(stdout, -1)); n != 2 {
		t.Errorf("%d same-key rows for 2 seeds:\n%s", n, stdout)
	}
	// Too few orders to lose a reply: undecided, not pass.
	code, stdout, _ = runCLI(t, "lab", "--store", "memory", "--orders", "1", "--seed", "3")
	if code != exitUnknown || !strings.Contains(stdout, "UNDECIDED") {
		t.Errorf("one order, no loss: exit %d\n%s", code, stdout)
	}
}

// TestLabOnAnExecStore: the lab runs behind the API on a store in
// another language (the lesson card's store, in JavaScript), with the
// card's figures and shape; a store that breaks the protocol is exit 2,
// one line.
func TestLabOnAnExecStore(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "lab", "--store", "exec", "--cmd", jsExampleCmd(t))
	if code != exitPass || !regexp.MustCompile(`(?m)^\s+1\s+same-key\s+100\s+0\s+100\s+0$`).MatchString(stdout) || !strings.Contains(stdout, "SHAPE HOLDS") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	code, stdout, stderr = runCLI(t, "lab", "--store", "exec", "--cmd", "echo garbage")
	if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "protocol error") {
		t.Errorf("a store that breaks the protocol: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestLabBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "--store", "mongo"},
		{"lab", "--orders", "0"},
		{"lab", "--seeds", "5-1"},
		{"lab", "--seeds", "x"},
		{"lab", "--seeds", "1-3", "--seed", "2"},
		{"lab", "extra"},
		{"lab", "--cmd", "node store.js"},
		{"lab", "--store", "exec"},
		{"lab", "--config", variantConfig(t)},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, stdout, stderr)
		}
	}
	code, stdout, _ := runCLI(t, "help", "lab")
	if code != exitPass || !strings.Contains(stdout, "Usage: idemcheck lab") {
		t.Errorf("help lab: exit %d\n%s", code, stdout)
	}
}

// TestLabInterruptReports: an interrupt stops the lab between orders; the
// seeds that ran are reported, and the run says it was interrupted
// (exit 3), not a setup error.
func TestLabInterruptReports(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var so, se bytes.Buffer
	code := run(ctx, []string{"lab", "--store", "memory", "--seeds", "1-1000", "--orders", "200"}, &so, &se)
	if code != exitUnknown || !strings.Contains(so.String()+se.String(), "INTERRUPTED: ") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr: %s", code, so.String(), se.String())
	}
	// --json says so too: its runs read as a whole lab's.
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	so.Reset()
	se.Reset()
	code = run(ctx, []string{"lab", "--store", "memory", "--seeds", "1-1000", "--orders", "200", "--json"}, &so, &se)
	var got labRuns
	// (No seed may have ended in the 2 s on a loaded machine: the
	// object says so all the same, as below.)
	if err := json.Unmarshal(so.Bytes(), &got); code != exitUnknown || err != nil || !got.Interrupted || got.Seeds != 1000 || len(got.Runs) >= 1000 {
		t.Fatalf("--json: exit %d, %v, %+v\nstderr: %s", code, err, got, se.String())
	}
	// Interrupted before its first seed ended, with --seeds or without:
	// one object, interrupted, its runs empty (it printed nothing).
	for _, args := range [][]string{{"lab", "--store", "memory", "--json"}, {"lab", "--store", "memory", "--seeds", "1-3", "--json"}} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		so.Reset()
		se.Reset()
		code := run(ctx, args, &so, &se)
		var got map[string]any
		if err := json.Unmarshal(so.Bytes(), &got); code != exitUnknown || err != nil || got["interrupted"] != true || got["runs"] == nil || got["verdict"] != "unknown" || !strings.Contains(se.String(), "INTERRUPTED: 0 of") {
			t.Errorf("%v interrupted at once: exit %d, %v, stdout %q, stderr %q", args, code, err, so.String(), se.String())
		}
	}
}

// variantConfig is a --config naming a mutant: lab, which has no
// --variant, refuses it rather than run the correct store unsaid.
func variantConfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "cfg.json")
	if err := os.WriteFile(p, []byte(`{"store":"memory","variant":"select-then-insert"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
