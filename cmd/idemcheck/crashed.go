package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
)

// A run holds a lock on its journal while it runs
// (history.CreateJournal); the kernel drops it when the process dies,
// however it dies. So a journal nobody holds, in a directory with no
// summary.json, is a run whose process died, while one held is a run
// still running beside this one in the same --out.

// crashedRuns lists the run directories under root whose process died
// before writing their files: each has a journal nobody holds and no
// summary.json.
func crashedRuns(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() || !crashed(dir) {
			continue
		}
		if _, ok := report.ReadEnded(dir); ok {
			continue // it finished, without its files: sayCrashed names it apart
		}
		if _, err := os.Stat(filepath.Join(dir, report.Marker)); err != nil {
			continue
		}
		if held, err := history.JournalHeld(filepath.Join(dir, harness.JournalFile)); err == nil && !held {
			out = append(out, dir) // nobody holds it: its run is gone
		}
	}
	return out
}

// sayCrashed tells, before a run, of the runs under root whose process
// died, and of those that finished but could not write their files (a
// full disk): their evidence is on disk, and recheck reports it.
func sayCrashed(w io.Writer, root string) {
	for _, dir := range crashedRuns(root) {
		fmt.Fprintf(w, "idemcheck: the run in %s ended before it finished (its process died); `idemcheck recheck %s` reports what it recorded\n", dir, dir)
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if ended, ok := report.ReadEnded(dir); ok && e.IsDir() && crashed(dir) {
			fmt.Fprintf(w, "idemcheck: %s: %s; `idemcheck recheck %s` reports what its journal recorded\n", dir, endedLine(ended), dir)
		}
	}
}

// keepKilledRun readies dir, a run directory named by --out, for a new
// run without losing the one it may hold: a run whose process died there
// (its journal nobody holds, no summary.json) is moved aside to a sibling
// named after the time, and said, so that recheck still reports it; a run
// still writing there (its journal held) is refused. A finished run that
// did not pass (a violation, undecided, interrupted, or recovered from
// its journal) is moved aside too: its evidence is what the new run would
// overwrite (a killed run, once rechecked, was replaced without a word).
// A passing run is replaced, as --out asks.
func keepKilledRun(dir string, w io.Writer) error {
	stamp := time.Now().UTC().Format("20060102-150405.000")
	if unpassed(dir) {
		aside := fmt.Sprintf("%s.kept-%s", filepath.Clean(dir), stamp)
		if err := os.Rename(dir, aside); err != nil {
			return fmt.Errorf("--out %s holds a run that did not pass, which could not be moved aside (%v): give another --out", dir, err)
		}
		fmt.Fprintf(w, "idemcheck: --out %s held a run that did not pass (a violation, undecided or cut short): moved to %s, its report there\n", dir, aside)
		return nil
	}
	if !crashed(dir) {
		return nil
	}
	if held, err := history.JournalHeld(filepath.Join(dir, harness.JournalFile)); err == nil && held {
		return fmt.Errorf("--out %s: a run is writing there now (its journal is held): give another --out", dir)
	}
	aside := fmt.Sprintf("%s.killed-%s", filepath.Clean(dir), stamp)
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("--out %s holds a run whose process died, which could not be moved aside (%v): recheck it, or give another --out", dir, err)
	}
	fmt.Fprintf(w, "idemcheck: --out %s held a run that ended before it finished (its process died): moved to %s; `idemcheck recheck %s` reports what it recorded\n", dir, aside, aside)
	return nil
}

// unpassed reports whether dir holds a finished black-box run (its
// summary.json) that did not pass or was cut short.
func unpassed(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return false
	}
	var sum struct {
		Pass bool `json:"pass"`
		Run  struct {
			Interrupted string `json:"interrupted"`
		} `json:"run"`
	}
	return json.Unmarshal(b, &sum) != nil || !sum.Pass || sum.Run.Interrupted != ""
}
