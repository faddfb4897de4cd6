package main

import (
	"strings"
	"testing"
)

// TestMutantsPipedSaysWhereItIs: a mutants run whose stderr is no
// terminal writes a line as each hunt and correct run ends (a piped run
// of 107 s said nothing until its table).
func TestMutantsPipedSaysWhereItIs(t *testing.T) {
	code, stdout, stderr := runCLI(t, "mutants", "--store", "memory", "--mutant", "no-fingerprint", "--out", t.TempDir())
	if code != exitPass {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"idemcheck: [1/2] ", "idemcheck: [2/2] ", "] no-fingerprint, seed 1: killed by mismatch", "] correct store, sched-mismatch, seed 1: pass"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestMutantsRefusesANegativeShrink: --shrink -1s was accepted, where
// --budget -1s is refused.
func TestMutantsRefusesANegativeShrink(t *testing.T) {
	if code, _, stderr := runCLI(t, "mutants", "--store", "memory", "--shrink", "-1s", "--out", t.TempDir()); code != exitUsage || !strings.Contains(stderr, "--shrink must not be negative") {
		t.Errorf("--shrink -1s: exit %d, %s", code, stderr)
	}
}
