package history

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// CreateJournal creates the journal file at path and starts a Journal on
// it, held by this process while it lives (CreateLocked), so JournalHeld
// tells a run still running from one whose process died.
func CreateJournal(path string) (*Journal, error) {
	f, err := CreateLocked(path)
	if err != nil {
		return nil, err
	}
	return NewJournal(f), nil
}

// JournalFile is the name of a check's journal in its results directory
// (harness.JournalFile says how a run uses it; report.Prune spares a run
// whose journal is still held).
const JournalFile = "journal.jsonl"

// CreateLocked creates the file at path holding an exclusive lock on it
// for as long as the process lives: the kernel drops the lock when the
// process dies, however it dies, so JournalHeld tells a run still running
// from one whose process died. Every journal of a run is made by it: a
// check's (CreateJournal) and the line journals of mutants and soak.
//
// The file is emptied only once the lock is held: a run started into the
// directory of one still running (two runs given one --out) emptied the
// live run's journal, then found it locked.
func CreateLocked(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: another idemcheck run still running writes this journal (its directory is that run's): give each run its own --out", path)
		}
		return nil, &os.PathError{Op: "lock", Path: path, Err: err}
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// JournalHeld reports whether a live process holds the journal at path
// (CreateLocked): false for one whose process died.
func JournalHeld(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true, nil
	}
	return false, nil
}
