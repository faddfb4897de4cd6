package report_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/results"
)

// TestPruneKeepsFailingAndForeign: --keep removes only the oldest passing
// runs it made, beyond the newest keep, the one latest points at among
// them; a failing or interrupted run, a directory it did not make (no
// marker) and latest all stay.
func TestPruneKeepsFailingAndForeign(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	run := func(i int, v check.Verdict, interrupted bool) string {
		d, err := report.PrepareRunDir(root, "memory", "correct", at.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Write(&results.Summary{Verdict: v, Interrupted: interrupted, Store: "memory"}); err != nil {
			t.Fatal(err)
		}
		return filepath.Base(d.Path)
	}
	oldPass := run(1, check.Pass, false)
	fail := run(2, check.Fail, false)
	cut := run(3, check.Unknown, true)
	pass2 := run(4, check.Pass, false)
	foreign := "20261201-100005.000-memory-correct" // a look-alike no run made
	if err := os.MkdirAll(filepath.Join(root, foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, foreign, "summary.json"), []byte(`{"verdict":"pass"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	latest := run(6, check.Pass, false)
	removed, err := report.Prune(root, 2) // latest and pass2
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.IsDir() {
			left = append(left, e.Name())
		}
	}
	if removed != 1 || slices.Contains(left, oldPass) {
		t.Errorf("removed %d, left %v: want the oldest passing run %s gone", removed, left, oldPass)
	}
	for _, keep := range []string{fail, cut, pass2, foreign, latest} {
		if !slices.Contains(left, keep) {
			t.Errorf("%s was removed", keep)
		}
	}
	// --keep 1: latest is the one passing run kept (it kept pass2 too).
	if removed, err := report.Prune(root, 1); err != nil || removed != 1 {
		t.Errorf("--keep 1: removed %d, %v; want pass2 gone", removed, err)
	}
	if _, err := os.Stat(filepath.Join(root, pass2)); err == nil {
		t.Errorf("--keep 1 left %s beside latest", pass2)
	}
}
