package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSQLiteDirsOfDeadRuns: a run removes the SQLite directories that
// runs killed before they could (their owner lock free, or, made by an
// older build, two days old) and says so; it keeps a live run's, a
// young one without its owner file, and one whose owner file was made a
// moment ago (its run about to lock it). They piled up in the temporary
// directory, one per killed run.
func TestSQLiteDirsOfDeadRuns(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mk := func(name string, owner bool) string {
		d := filepath.Join(tmp, sqliteDirPattern+name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if owner {
			if err := os.WriteFile(filepath.Join(d, sqliteOwner), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	dead := mk("dead", true)
	aged := time.Now().Add(-time.Minute)
	if err := os.Chtimes(filepath.Join(dead, sqliteOwner), aged, aged); err != nil {
		t.Fatal(err)
	}
	old := mk("old", false)
	long := time.Now().Add(-3 * 24 * time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	young := mk("young", false)
	// Its owner file made this instant and not locked yet: a run
	// starting beside this one (CI shards start together), kept.
	starting := mk("starting", true)
	var said strings.Builder
	liveDir, release, err := makeSQLiteDir(&said) // a live run's: its lock held
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if !strings.Contains(said.String(), "removed 2 SQLite") {
		t.Errorf("said %q, want the 2 dead runs' directories removed", said.String())
	}
	for d, want := range map[string]bool{dead: false, old: false, young: true, starting: true, liveDir: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
	said.Reset()
	_, release2, err := makeSQLiteDir(&said) // the live one is kept
	if err != nil {
		t.Fatal(err)
	}
	release2()
	if _, err := os.Stat(liveDir); err != nil || said.Len() != 0 {
		t.Errorf("a live run's directory: %v, said %q", err, said.String())
	}
	release()
	if _, err := os.Stat(liveDir); !os.IsNotExist(err) {
		t.Errorf("released, the directory stays: %v", err)
	}
}
