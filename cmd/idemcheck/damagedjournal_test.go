package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/report"
)

// TestRecheckDamagedFirstLine: a journal whose first line is unreadable
// though whole lines follow it was damaged after it was written (no run
// dies inside its first line and writes on): recheck says so (exit 2),
// where it said the run died as it began and nothing ran (exit 3),
// beside later lines that recorded failed seeds. A journal that is one
// torn line still reads as a run that died as it began.
func TestRecheckDamagedFirstLine(t *testing.T) {
	write := func(journal string) string {
		dir := t.TempDir()
		for name, body := range map[string]string{report.Marker: "", harness.JournalFile: journal} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	dir := write("e\":\"sqlite\",\"started\":\"2026-12-07T10:00:00Z\"}\n{\"type\":\"seed\",\"seed\":1,\"verdict\":\"fail\"}\n")
	code, stdout, stderr := runCLI(t, "recheck", dir)
	if code != exitUsage || !strings.Contains(stderr, "damaged after it was written") || strings.Contains(stdout, "nothing ran") {
		t.Fatalf("a damaged first line: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	// Its head cut in half past its type (the kind still reads), whole
	// lines after it: damaged all the same.
	dir = write("{\"type\":\"soak\",\"store\":\"memory\",\"started\":\"2026\n{\"type\":\"began\",\"seed\":1}\n{\"type\":\"seed\",\"seed\":1,\"verdict\":\"fail\"}\n")
	code, stdout, stderr = runCLI(t, "recheck", dir)
	if code != exitUsage || !strings.Contains(stderr, "damaged after it was written") || strings.Contains(stdout, "nothing ran") {
		t.Fatalf("a damaged head of a soak's journal: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	dir = write("{\"type\":\"so")
	if code, stdout, _ := runCLI(t, "recheck", dir); code != exitUnknown || !strings.Contains(stdout, "nothing ran") {
		t.Fatalf("a journal torn in its first line: exit %d\n%s", code, stdout)
	}
}
