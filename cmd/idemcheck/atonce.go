package main

import (
	"io"
	"sync"
)

// atOnce is what a command that promised one JSON object prints when a
// second signal stops it at once (interruptible's exit): its run's
// directory and how to read it, so that a CI job parsing stdout gets an
// object, not nothing (a check --json stopped so printed 0 bytes).
var atOnce struct {
	mu    sync.Mutex
	print func()
}

// jsonAtOnce has a stop at once print the object of a run whose results
// go to dir on w, when the command prints JSON (asJSON); the returned
// function withdraws it (the command prints its own object from there
// on), and does nothing otherwise.
func jsonAtOnce(asJSON bool, w io.Writer, command, dir string) (withdraw func()) {
	if !asJSON {
		return func() {}
	}
	atOnce.mu.Lock()
	defer atOnce.mu.Unlock()
	atOnce.print = func() {
		_ = printJSON(w, stoppedAtOnce{Command: command, Verdict: "unknown", Interrupted: true, Dir: dir,
			Stopped: "stopped at once by a second interrupt: the results were not written; idemcheck recheck " + dir + " reports what the run recorded (its journal)"})
	}
	return func() {
		atOnce.mu.Lock()
		defer atOnce.mu.Unlock()
		atOnce.print = nil
	}
}

// stoppedAtOnce is the object jsonAtOnce prints.
type stoppedAtOnce struct {
	Command     string `json:"command"`
	Verdict     string `json:"verdict"`
	Interrupted bool   `json:"interrupted"`
	Stopped     string `json:"stopped"`
	Dir         string `json:"results_dir"`
}

// printAtOnce prints the object a stop at once owes, if any.
func printAtOnce() {
	atOnce.mu.Lock()
	defer atOnce.mu.Unlock()
	if atOnce.print != nil {
		atOnce.print()
		atOnce.print = nil
	}
}
