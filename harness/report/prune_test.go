package report_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
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

// TestPruneSparesNewerAndLiveRuns: two runs into one --out, the older
// ending last (latest points at it): --keep 1 removed the newer one,
// whose Results line then named nothing. The newest keep by name stay,
// and latest beside them. A passing run whose journal a live process
// still holds (its report still being written) is never removed.
func TestPruneSparesNewerAndLiveRuns(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(i int) string {
		d, err := report.PrepareRunDir(root, "sqlite", "correct", at.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Write(&results.Summary{Verdict: check.Pass, Store: "sqlite"}); err != nil {
			t.Fatal(err)
		}
		return d.Path
	}
	live := mk(1)
	j, err := history.CreateLocked(filepath.Join(live, history.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	older, newer := mk(2), mk(3)
	if err := os.Remove(filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(older), filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
	if removed, err := report.Prune(root, 1); err != nil || removed != 0 {
		t.Errorf("removed %d, %v: want none (the newest, latest, and a live run)", removed, err)
	}
	for _, d := range []string{live, older, newer} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed", filepath.Base(d))
		}
	}
	j.Close()
	if removed, err := report.Prune(root, 1); err != nil || removed != 1 {
		t.Errorf("once its process let its journal go: removed %d, %v; want the oldest", removed, err)
	}
	if _, err := os.Stat(live); err == nil {
		t.Error("the oldest passing run, no longer held, was kept")
	}
}

// TestPruneSparesWholeJobs: a soak's, mutants' or mutate's directory is
// the record of a whole job: a check's --keep removed a soak's, calling
// it an old passing run. Only check runs are pruned.
func TestPruneSparesWholeJobs(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var jobs []string
	for i, kind := range []string{"correct", "soak", "mutants", "mutate"} { // the check run oldest; latest a mutate's
		d, err := report.PrepareRunDir(root, "memory", kind, at.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Write(&results.Summary{Verdict: check.Pass, Store: "memory"}); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, filepath.Base(d.Path))
	}
	if removed, err := report.Prune(root, 0); err != nil || removed != 1 {
		t.Fatalf("--keep 0: removed %d, %v; want the check run alone", removed, err)
	}
	for _, j := range jobs[1:] {
		if _, err := os.Stat(filepath.Join(root, j)); err != nil {
			t.Errorf("%s was removed: %v", j, err)
		}
	}
}
