package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSaveSummaryNamesAnIncompleteDirectory: a run whose results
// directory was removed under it (or whose disk filled) says so on its
// Results line, as check's does; mutants named the missing directory
// plainly, its error on stderr alone.
func TestSaveSummaryNamesAnIncompleteDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if where := saveSummary(&stderr, dir, map[string]string{"verdict": "pass"}, "pass", false); where != dir {
		t.Fatalf("a summary written: Results %q, want %q", where, dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	where := saveSummary(&stderr, dir, map[string]string{"verdict": "pass"}, "pass", false)
	if !strings.HasPrefix(where, dir+" (incomplete: its summary.json could not be written") || !strings.Contains(stderr.String(), "the verdict stands") {
		t.Fatalf("a summary not written: Results %q, stderr %q", where, stderr.String())
	}
}
