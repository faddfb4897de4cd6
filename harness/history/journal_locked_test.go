package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreateLockedLeavesALiveRunsJournal: a second run given the
// directory of one still running is refused, saying so, and the live
// run's journal keeps what it wrote: it was emptied before the lock was
// tried.
func TestCreateLockedLeavesALiveRunsJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	live, err := CreateLocked(path)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := live.WriteString("{\"type\":\"run\"}\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateLocked(path); err == nil || !strings.Contains(err.Error(), "another idemcheck run still running") {
		t.Fatalf("a second run into a live run's directory: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{\"type\":\"run\"}\n" {
		t.Fatalf("the live run's journal holds %q", b)
	}
	live.Close()
	again, err := CreateLocked(path) // its run gone: the file is the new run's, empty
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Fatalf("a dead run's journal taken over holds %q", b)
	}
}
