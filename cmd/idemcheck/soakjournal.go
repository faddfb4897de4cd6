package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
)

// A soak of hundreds of runs must not be lost with its process: a second
// Ctrl-C, a crash or the machine's OOM killer would take the table that is
// printed at the end with it. So each finished run is appended to a
// journal, one JSON line per seed (or draw), flushed to disk before the
// next run starts: what a soak found survives whatever ends it.

// soakEntry is one journal line: a seed's run and its verdicts.
type soakEntry struct {
	Seed int64 `json:"seed"`
	// Draw is a drawn run's check command (--random-flags).
	Draw      string           `json:"draw,omitempty"`
	Verdict   string           `json:"verdict"`
	Scenarios []soakEntryScene `json:"scenarios,omitempty"`
	// Dir is the results directory kept for a run that did not pass.
	Dir   string  `json:"dir,omitempty"`
	Error string  `json:"error,omitempty"`
	At    string  `json:"at"`
	Secs  float64 `json:"seconds"`
}

// soakEntryScene is one scenario's verdict in a journal line.
type soakEntryScene struct {
	Name    string  `json:"name"`
	Verdict string  `json:"verdict"`
	Seconds float64 `json:"seconds"`
	Why     string  `json:"why,omitempty"`
}

// soakJournal appends entries to a file under the soak's --out.
type soakJournal struct {
	path string
	f    *os.File
}

// openJournal creates the journal of a soak started at start on store.
func openJournal(out, store string, start time.Time) (*soakJournal, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(out, fmt.Sprintf("soak-%s-%s.jsonl", store, start.Format("20060102-150405.000")))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &soakJournal{path: path, f: f}, nil
}

// add writes one seed's entry and syncs it to disk.
func (j *soakJournal) add(e soakEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return j.f.Sync()
}

// Close closes the journal's file.
func (j *soakJournal) Close() error { return j.f.Close() }

// entryOf makes a seed's journal entry from its run's summary.
func entryOf(seed int64, draw string, sum *results.Summary, took time.Duration) soakEntry {
	e := soakEntry{Seed: seed, Draw: draw, Verdict: string(sum.Verdict), At: time.Now().UTC().Format(time.RFC3339), Secs: took.Seconds()}
	for _, s := range sum.Scenarios {
		sc := soakEntryScene{Name: s.ID().String(), Verdict: string(s.Verdict), Seconds: s.Seconds}
		switch s.Verdict {
		case check.Unknown:
			sc.Why = whyUndecided(s)
		case check.Fail:
			if len(s.Violations) > 0 {
				sc.Why = s.Violations[0].Detail
			}
		}
		e.Scenarios = append(e.Scenarios, sc)
	}
	return e
}
