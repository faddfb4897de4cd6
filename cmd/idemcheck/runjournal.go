package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/internal/buildinfo"
	"github.com/idemcheck/idemcheck/internal/wholefile"
)

// A run made of many runs (mutants' hunts, soak's seeds) journals each
// one as it ends, one JSON line synced to disk, in its results directory
// (harness.JournalFile, held while the process lives, as check's is):
// a run whose process dies keeps what it finished, the next run names it
// (crashedRuns), and recheck reports it. The first line says what the
// run is and what it plans, each with a "type" first, so that even a
// torn first line says whose journal it is.

// lineJournal appends JSON lines to a run's journal, each synced before
// add returns; add is safe from goroutines at once.
type lineJournal struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

// createLineJournal starts the journal of the run in dir, its first line
// head.
func createLineJournal(dir *report.RunDir, head any) (*lineJournal, error) {
	path := filepath.Join(dir.Path, harness.JournalFile)
	f, err := history.CreateLocked(path)
	if err != nil {
		return nil, fmt.Errorf("cannot write results to %s: %v", dir.Path, unwrapPath(err))
	}
	j := &lineJournal{path: path, f: f}
	if err := j.add(head); err != nil {
		j.Close()
		return nil, fmt.Errorf("cannot write results to %s: %v", dir.Path, err)
	}
	return j, nil
}

// add writes v as one line and syncs it to disk.
func (j *lineJournal) add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return j.f.Sync()
}

// adder is add for a run's hooks: a journal that stops writing is said
// once on stderr, and the run goes on.
func (j *lineJournal) adder(stderr io.Writer) func(v any) {
	var once sync.Once
	return func(v any) {
		if err := j.add(v); err != nil {
			once.Do(func() {
				fmt.Fprintf(stderr, "idemcheck: the run's journal stopped: %v (the verdict stands; had the run crashed, what it finished would have been lost)\n", err)
			})
		}
	}
}

// Close closes the journal's file, which stays: with summary.json beside
// it, it is the record of each run as it ended.
func (j *lineJournal) Close() error { return j.f.Close() }

// typeHead reads a journal line's type from its first bytes, whole or not.
var typeHead = regexp.MustCompile(`^\{"type":"([a-z-]+)"`)

// journalKind is the type of the first line of the journal at path: what
// run wrote it ("" when it cannot be told).
func journalKind(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	br := bufio.NewReader(f)
	line, err := br.ReadBytes('\n')
	whole := err == nil // ended by its newline
	var l struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(line, &l) == nil {
		return l.Type
	}
	if m := typeHead.FindSubmatch(line); m != nil {
		return string(m[1])
	}
	// Torn before its type ended: whose it is shows only if one kind's
	// head begins so.
	var kinds []string
	for _, k := range []string{mutantsKind, mutateKind, soakKind} {
		if len(line) > 0 && bytes.HasPrefix([]byte(`{"type":"`+k+`"`), line) {
			kinds = append(kinds, k)
		}
	}
	switch {
	case len(kinds) == 1:
		return kinds[0]
	case whole && more(br):
		// Unreadable, yet lines follow it: no run dies inside its
		// first line and writes more, so the file was damaged
		// afterwards; what follows may record failures, and "nothing
		// ran" would hide them.
		return damagedKind
	case len(kinds) > 1 || !whole:
		// Torn where no kind's head shows, or empty (a run killed as it
		// started, before its first line was out): its first line
		// never ended, so nothing ran.
		return tornKind
	}
	return ""
}

// more reports whether r holds another byte.
func more(r *bufio.Reader) bool {
	_, err := r.Peek(1)
	return err == nil
}

// damagedJournal is recheck's refusal of a journal whose first line is
// unreadable though whole lines follow it ([damagedKind]).
func damagedJournal(path string) error {
	return fmt.Errorf("recheck: %s: the first line of the journal (what run it was) is unreadable, yet whole lines follow it: the file was damaged after it was written, not cut short by a death, and what follows may record failures; recheck cannot tell what run it was (restore the file, or run again)", path)
}

// damagedKind is the kind of a journal whose first line is unreadable
// though lines follow it: damaged after it was written, not cut short.
const damagedKind = "damaged"

// tornKind is the kind of a journal torn inside its first line, or
// empty: its run died as it began, before it ran anything.
const tornKind = "torn"

// recoverTorn reports a run whose journal is torn inside its first line:
// nothing ran, nothing was judged (exit 3).
func recoverTorn(dir string, asJSON bool, stdout io.Writer) (int, error) {
	const why = "its process died before the first line of its journal was whole (starting: its servers, its store, or that line): nothing ran, nothing was judged"
	if asJSON {
		return exitUnknown, printJSON(stdout, map[string]any{"dir": dir, "recovered": true, "verdict": "unknown", "why": why})
	}
	fmt.Fprintf(stdout, "the run in %s ended before it finished: %s\nexit 3: undecided\n", dir, why)
	return exitUnknown, nil
}

// journalLine is one whole line of a line journal: its type and itself.
type journalLine struct {
	Type string
	Raw  json.RawMessage
}

// lineHead is what every line journal's first line (mutants, mutate,
// soak) says first: its kind, the store, when and how it was started,
// and by which build. Each head embeds it, so its JSON opens with the
// type (journalKind reads a torn head's kind from its first bytes).
type lineHead struct {
	Type    string    `json:"type"`
	Store   string    `json:"store"`
	Started time.Time `json:"started"`
	Argv    []string  `json:"argv"`
	Commit  string    `json:"commit,omitempty"`
}

// newLineHead is the head of a journal of the kind, for `idemcheck cmd
// args...` on store.
func newLineHead(kind, store string, started time.Time, cmd string, args []string) lineHead {
	return lineHead{Type: kind, Store: store, Started: started, Argv: append([]string{"idemcheck", cmd}, args...), Commit: buildinfo.Get().Revision()}
}

// readJournal reads the journal at path (readLineJournal) and its first
// line, of the given kind, into head: ok is false when that line is
// missing, torn or of another kind (the run died as it wrote it, and
// recoverTorn reports it).
func readJournal(path, kind string, head any) (lines []journalLine, torn int, ok bool, err error) {
	lines, torn, err = readLineJournal(path)
	if err != nil {
		return nil, 0, false, fmt.Errorf("recheck: %v", err)
	}
	ok = len(lines) > 0 && lines[0].Type == kind && json.Unmarshal(lines[0].Raw, head) == nil
	if !ok && len(lines) > 0 {
		// Its head unreadable, yet whole lines follow it: damaged after
		// it was written, not a run that died as it began (which was
		// reported as nothing ran beside lines recording seeds).
		return nil, 0, false, damagedJournal(path)
	}
	return lines, torn, ok, nil
}

// readLineJournal reads the journal at path: every line that is whole
// JSON, and how many are not (the last one torn by the process's death,
// or damage), which are left out.
func readLineJournal(path string) (lines []journalLine, torn int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		line, rerr := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var l struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(line, &l) == nil && l.Type != "" {
				lines = append(lines, journalLine{Type: l.Type, Raw: bytes.Clone(bytes.TrimSpace(line))})
			} else {
				torn++
			}
		}
		if rerr == io.EOF {
			return lines, torn, nil
		}
		if rerr != nil {
			return lines, torn, rerr
		}
	}
}

// writeSummaryJSON writes a run's summary.json into dir: its record once
// it ends (a directory with one is not a crashed run).
func writeSummaryJSON(dir string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := wholefile.Write(filepath.Join(dir, "summary.json"), func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return err
	}
	report.DropEnded(dir)
	return nil
}

// saveSummary writes a finished run's summary.json (writeSummaryJSON);
// one that cannot be written (a full disk) is said, and the run leaves
// its last word (report.WriteEnded) in the room its directory kept for
// it, so that its journal, stopped where the disk filled, does not read
// as a dead run's. The verdict stands either way. where is what the
// run's Results line names: dir, and when its summary is missing, that
// it is incomplete (mutants named a directory with nothing in it).
func saveSummary(stderr io.Writer, dir string, v any, verdict string, interrupted bool) (where string) {
	err := writeSummaryJSON(dir, v)
	if err == nil {
		return dir
	}
	fmt.Fprintf(stderr, "idemcheck: writing %s: %v (the verdict stands)\n", dir, err)
	leaveLastWord(stderr, dir, verdict, interrupted, []string{"summary.json: " + unwrapPath(err).Error()})
	return dir + " (incomplete: its summary.json could not be written, as said above; the verdict stands)"
}

// leaveLastWord writes the last word (report.WriteEnded) of the run in
// dir, which finished but could not write its summary: its verdict and
// why its files are missing. A word that cannot be written either is
// said.
func leaveLastWord(stderr io.Writer, dir, verdict string, interrupted bool, why []string) {
	e := report.Ended{At: time.Now(), Verdict: verdict, Interrupted: interrupted, Unwritten: why}
	if err := report.WriteEnded(dir, e); err != nil {
		fmt.Fprintf(stderr, "idemcheck: nor could the run's last word be written (%v): recheck will take it for a run whose process died\n", unwrapPath(err))
	}
}

// howEnded says how a run recovered from its journal ended: as its last
// word says (report.ReadEnded: it finished, without its files), or as
// died says (its process died).
func howEnded(dir, died string) string {
	if e, ok := report.ReadEnded(dir); ok {
		return endedLine(e)
	}
	return died
}
