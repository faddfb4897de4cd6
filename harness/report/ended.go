package report

import (
	"bytes"
	"encoding/json"
	"fmt"
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
// as no word at all), and [WriteEnded] writes the word into that room in
// place: rewriting bytes a file already has needs no free space. A run
// whose files are written removes it ([DropEnded]).
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

// maxReasons and maxReason bound an [Ended]'s reasons, so that it fits
// the room ([endRoom]) whatever they say.
const maxReasons, maxReason = 4, 600

// WriteEnded writes e into dir's EndFile, in the room PrepareRunDir (or
// ReserveEnd) made for it: a run whose files could not be written says
// so, and recheck and the next run read it ([ReadEnded]) instead of
// taking the run for a dead one. Reasons past maxReasons, and the bytes
// of one past maxReason, are cut.
func WriteEnded(dir string, e Ended) error {
	if len(e.Unwritten) > maxReasons {
		e.Unwritten = append(e.Unwritten[:maxReasons-1:maxReasons-1], "and more")
	}
	for i, r := range e.Unwritten {
		if len(r) > maxReason {
			e.Unwritten[i] = r[:maxReason] + "…"
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if len(b) > endRoom {
		return fmt.Errorf("the last word takes %d bytes, more than the %d kept for it", len(b), endRoom)
	}
	f, err := os.OpenFile(filepath.Join(dir, EndFile), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return err
	}
	return f.Sync()
}

// DropEnded removes dir's EndFile: the run's files are written, and they
// say everything.
func DropEnded(dir string) { os.Remove(filepath.Join(dir, EndFile)) }

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
