package wholefile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWhole: a write that succeeds replaces the file; one that fails
// midway leaves the file as it was and nothing beside it.
func TestWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.json")
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "first"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, strings.Repeat("x", 1<<20))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want the writer's", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Errorf("after a failed write the file holds %q, want it as it was", b)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("files left: %v", es)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
}

// TestSweep: the file a write killed midway left beside its target goes;
// the target and other files stay.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"report.html", ".report.html.370940764", "history.jsonl", ".hidden", "notes.1"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := Sweep(dir); len(got) != 1 || got[0] != ".report.html.370940764" {
		t.Fatalf("Sweep removed %v, want the one left by a write", got)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 4 {
		t.Errorf("%d files left, want 4", len(left))
	}
}
