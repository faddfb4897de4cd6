package main

import (
	"context"
	"io"
	"os"

	"github.com/idemcheck/idemcheck/harness/worker"
)

// workerHelp is printed by `idemcheck worker --help`. The command is
// internal: the harness starts it, so the main help does not list it.
const workerHelp = `Usage: idemcheck worker   (internal)

A worker process of the harness: it reads a setup line and orders as JSON
lines on stdin, runs the orders as one client against the store the setup
names (the same SQLite file, Postgres schema or Redis namespace as the
harness), and writes its history (store calls, work, answers) as JSON lines
on stdout. The harness kills it with SIGKILL at chosen moments. It is not
meant to be run by hand.
`

// cmdWorker runs a worker process; it returns the process's exit code.
func cmdWorker(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("worker", workerHelp)
	store := fs.String("store", "", "with --cmd: the exec store's backend name")
	line := fs.String("cmd", "", "the exec store's command (docs/protocol.md)")
	hello := fs.String("hello", "", "the exec store's hello, as JSON")
	if err := parse(fs, workerHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	if err := registerWorkerStore(*store, *line, *hello); err != nil {
		return exitUsage, err
	}
	return worker.Main(ctx, stdin, stdout, stderr), nil
}

// workerCommand is how the harness starts a worker: this program, with the
// worker command (or nothing when the program's path is unknown, and the
// scenarios that need workers are then skipped, saying why).
func workerCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "worker"}
}
