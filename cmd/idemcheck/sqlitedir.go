package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// A run's SQLite files live in a temporary directory it removes when it
// ends. One killed (SIGKILL, out of memory) cannot: the next run removes
// what such runs left. A run holds a lock on sqliteOwner in its directory
// while it runs (the kernel drops it when the process dies, however it
// dies), so a directory whose lock nobody holds is a dead run's.

const (
	sqliteDirPattern = "idemcheck-sqlite-"
	sqliteOwner      = ".owner"
	// sqliteDirYoung is how old a directory with no owner file must be
	// before it is taken for a dead run's: one made this instant may not
	// have its owner file yet, and an older build's run makes none (its
	// directory's time moves only as files come and go; a run lasts 24 h
	// at most).
	sqliteDirYoung = 48 * time.Hour
	// sqliteOwnerGrace is how old an owner file must be before its free
	// lock means a dead run: a run locks it a moment after it makes it.
	sqliteOwnerGrace = 10 * time.Second
)

// makeSQLiteDir makes a run's directory for its SQLite files, after
// removing those of dead runs (said on w), and holds its owner lock
// until release is called; release removes the directory.
func makeSQLiteDir(w io.Writer) (dir string, release func(), err error) {
	if n := reapSQLiteDirs(); n > 0 {
		fmt.Fprintf(w, "idemcheck: removed %d SQLite director(ies) left in %s by killed runs\n", n, os.TempDir())
	}
	dir, err = os.MkdirTemp("", sqliteDirPattern)
	if err != nil {
		return "", nil, fmt.Errorf("cannot make a directory for the SQLite files: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, sqliteOwner), os.O_CREATE|os.O_RDWR, 0o644)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("cannot lock the directory for the SQLite files: %v", err)
	}
	return dir, func() { f.Close(); os.RemoveAll(dir) }, nil
}

// reapSQLiteDirs removes the SQLite directories of runs that died, and
// says how many.
func reapSQLiteDirs() int {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), sqliteDirPattern+"*"))
	n := 0
	for _, d := range dirs {
		if deadSQLiteDir(d) && os.RemoveAll(d) == nil {
			n++
		}
	}
	return n
}

// deadSQLiteDir reports whether d is the SQLite directory of a run that
// is gone: its owner lock free, or, with no owner file (made by an
// older build), untouched for sqliteDirYoung.
func deadSQLiteDir(d string) bool {
	f, err := os.Open(filepath.Join(d, sqliteOwner))
	if err != nil {
		st, serr := os.Stat(d)
		return serr == nil && st.IsDir() && time.Since(st.ModTime()) > sqliteDirYoung
	}
	defer f.Close()
	// A run makes its owner file, then locks it: one made a moment ago
	// may not be locked yet, and taking it for a dead run's would remove
	// a run starting beside this one (CI shards start together).
	if st, err := f.Stat(); err != nil || time.Since(st.ModTime()) < sqliteOwnerGrace {
		return false
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
