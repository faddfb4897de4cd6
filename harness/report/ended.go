package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"time"
)

// EndFile is a run directory's last word, for a run that finished but
// could not write its files (a full disk, above all): the run's verdict
// and why its files are missing. Without it, the run's journal, which
// stopped where the disk filled, reads as the journal of a run whose
// process died, and recheck would say so: a lie about a run that
// finished, and printed its verdict.
//
// A full disk leaves no room for a word written at the end, so
// PrepareRunDir makes the file at the start, endRoom bytes of spaces (not
// JSON: a run that wrote its files, or died, leaves it so, and it reads
// as no word at all), and [RunDir.End] writes the word into that room in
// place: rewriting bytes a file already has needs no free space. A run
// whose files are written removes it ([RunDir.Written]).
const EndFile = "ended.json"

// endRoom is the room EndFile keeps: one page, which an [Ended] fits in
// once its reasons are cut to size.
const endRoom = 4096

// Ended is the word in [EndFile].
type Ended struct {
	// At is when the run ended.
	At time.Time `json:"at"`
	// Verdict is the run's verdict, as it printed it.
	Verdict string `json:"verdict"`
	// Interrupted: the run was interrupted (its verdict is that of what
	// it judged before).
	Interrupted bool `json:"interrupted,omitempty"`
	// Unwritten says why each file that is missing is missing.
	Unwritten []string `json:"unwritten"`
}

// ReserveEnd makes dir's EndFile, endRoom bytes of spaces: the room for
// the last word of a run whose directory PrepareRunDir did not make (the
// black-box run's, whose --out is the directory itself).
func ReserveEnd(dir string) error { return reserveEnd(dir) }

// reserveEnd makes dir's EndFile, endRoom bytes of spaces.
func reserveEnd(dir string) error {
	return os.WriteFile(filepath.Join(dir, EndFile), bytes.Repeat([]byte{' '}, endRoom), 0o644)
}

// End writes e into the run directory's EndFile, in the room PrepareRunDir
// made for it: a run whose files could not be written says so, and
// recheck and the next run read it ([ReadEnded]) instead of taking the
// run for a dead one. Each reason is cut until e fits the room.
func (d *RunDir) End(e Ended) error {
	f, err := os.OpenFile(filepath.Join(d.Path, EndFile), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := json.Marshal(e)
	for limit := 512; err == nil && len(b) > endRoom && limit >= 16; limit /= 2 {
		for i, r := range e.Unwritten {
			if len(r) > limit {
				e.Unwritten[i] = r[:limit] + "…"
			}
		}
		if len(e.Unwritten) > 4 {
			e.Unwritten = append(e.Unwritten[:3], "and more")
		}
		b, err = json.Marshal(e)
	}
	if err != nil {
		return err
	}
	if len(b) > endRoom {
		b = b[:0] // cannot happen once cut; a word that does not fit is none
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return err
	}
	return f.Sync()
}

// Written removes the run directory's EndFile: its files are written, and
// they say everything.
func (d *RunDir) Written() { os.Remove(filepath.Join(d.Path, EndFile)) }

// ReadEnded reads dir's EndFile: the word of a run that finished without
// its files, or false (no file, or only the room a run left: it wrote its
// files, or died).
func ReadEnded(dir string) (Ended, bool) {
	b, err := os.ReadFile(filepath.Join(dir, EndFile))
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return Ended{}, false
	}
	var e Ended
	if json.Unmarshal(b, &e) != nil || e.Verdict == "" {
		return Ended{}, false
	}
	return e, true
}
