// Package wholefile writes a file whole or not at all: a run's record
// must never be a file cut short by a full disk.
package wholefile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// Write writes the file at path with f: into a new file beside it (a
// dot-name in the same directory), renamed over path once every byte is
// written and the file closed. A write that fails (a full disk) leaves no
// file cut short behind, and path as it was. The mode is 0644.
func Write(path string, f func(io.Writer) error) error {
	file, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	fail := func(err error) error {
		file.Close()
		os.Remove(file.Name())
		return err
	}
	bw := bufio.NewWriter(file)
	if err := f(bw); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := file.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := file.Close(); err != nil {
		os.Remove(file.Name())
		return err
	}
	if err := os.Rename(file.Name(), path); err != nil {
		os.Remove(file.Name())
		return err
	}
	return nil
}

// Sweep removes from dir the files Write left behind when its process
// died mid-write (a second interrupt stops idemcheck at once; a SIGKILL):
// the dot-named files beside their target, which no later write reuses.
// It returns the names it removed. Only a directory whose files Write
// makes is swept: a run's directory.
func Sweep(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if e.Type().IsRegular() && leftover.MatchString(e.Name()) && os.Remove(filepath.Join(dir, e.Name())) == nil {
			removed = append(removed, e.Name())
		}
	}
	return removed
}

// leftover is the name os.CreateTemp gives Write's file: a dot, the
// target's name, a dot and the random digits standing for "*".
var leftover = regexp.MustCompile(`^\..+\.[0-9]+$`)
