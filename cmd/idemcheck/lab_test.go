package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestLabJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, "lab", "--store", "memory", "--orders", "40", "--seed", "2", "--json")
	if code != exitPass {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var r struct {
		Seed     int64 `json:"seed"`
		Orders   int   `json:"orders"`
		Versions []struct {
			Name          string `json:"name"`
			Charges       int    `json:"charges"`
			DoubleCharged int    `json:"double_charged"`
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if r.Seed != 2 || r.Orders != 40 || len(r.Versions) != 3 {
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
	for _, want := range []string{"no-key", "key-per-try", "same-key", "card (npm run l4, seed 1)", "132   24", "SHAPE HOLDS on seeds 1-2"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
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

func TestLabBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "--store", "mongo"},
		{"lab", "--orders", "0"},
		{"lab", "--seeds", "5-1"},
		{"lab", "--seeds", "x"},
		{"lab", "extra"},
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
