// Command idemcheck runs idempotency-key stores under concurrent clients and
// faults and checks that each key's work ran at most once, that fencing
// rejected stale writers and that replays were faithful.
//
// Exit codes: 0 every check passed; 1 a violation was found; 2 bad usage or
// a setup error (one line on stderr says which); 3 the run could not decide
// (interrupted, a checker's evidence was incomplete, or every scenario was
// skipped on the store: nothing was judged).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/idemcheck/idemcheck/harness/servers"
)

// Exit codes, as docs/DESIGN.md §7 defines them (3 is ours: undecided).
const (
	exitPass    = 0
	exitFail    = 1
	exitUsage   = 2
	exitUnknown = 3
)

// usageError is bad input: printed as one line, exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const mainHelp = `idemcheck: a correctness harness for idempotency-key stores.

Usage:
  idemcheck check   [flags]   run scenarios against a store and check the history
  idemcheck list    [--json]  list stores, variants (correct and mutants), scenarios and checkers
  idemcheck lab     [flags]   the lesson card's lab: no-key, key-per-try, same-key over a lossy link
  idemcheck mutants [flags]   hunt every mutant with the scenario meant to kill it; the correct store must pass
  idemcheck mutate  [flags]   generate mutants from the store's own statements and scripts; score the kills
  idemcheck demo <mutant> [flags]  replay a mutant's minimal interleaving step by step, then on the correct store
  idemcheck recheck <run-dir>  judge a saved run's history again with this build's checkers
  idemcheck replay <run-dir>   run a saved run's failing scheduled episodes again, on the same interleaving
  idemcheck soak    [flags]   every scenario on many seeds beside CPU hogs: a correct store must never fail
  idemcheck merge FILE|DIR...  join the --json reports of a run's shards (--shard i/n) into its verdict
  idemcheck http    [flags]   test a running HTTP service's Idempotency-Key handling, across instances, through faults
  idemcheck version           print the version, the commit and the Go version
  idemcheck help [command]    show help for a command

Run 'idemcheck <command> --help' for a command's flags.

Exit codes: 0 pass, 1 violation found, 2 bad usage or setup error, 3 undecided
(or nothing judged: every scenario skipped).
`

func main() {
	ctx, stop := interruptible(os.Stderr, func() {
		// Stopped at once: the servers this run started go with it.
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = servers.CloseAll(cctx)
		printAtOnce() // a --json command's object still
		os.Exit(exitUnknown)
	})
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interruptible returns a context that the first SIGINT, SIGTERM or
// SIGHUP (the terminal closed, an ssh session dropped) cancels: a command
// then finishes what ran, writes what it recorded and exits 3. A second
// signal, sameSignal or more after the first, calls exit at once
// (containers it started are removed by the next run, see servers.Reap).
// stop stops listening.
func interruptible(stderr io.Writer, exit func()) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		var first time.Time
		select {
		case s := <-sig:
			first = time.Now()
			fmt.Fprintf(stderr, "\nidemcheck: %v: stopping; the results of what ran are being written (%v again to stop at once)\n", s, s)
			cancel()
		case <-done:
			return
		}
		for {
			select {
			case s := <-sig:
				if time.Since(first) < sameSignal {
					continue // the first one again: a process group's Ctrl-C, timeout -s INT
				}
				fmt.Fprintf(stderr, "idemcheck: %v again: stopped at once; what ran is in its journal, and `idemcheck recheck` of its results directory reports it\n", s)
				exit()
				return
			case <-done:
				return
			}
		}
	}()
	return ctx, func() { signal.Stop(sig); close(done); cancel() }
}

// sameSignal is how soon after the first a signal is taken for the same
// one delivered twice (to each process of a group, or by a wrapper that
// passes it on as well), not a second request to stop at once.
const sameSignal = time.Second

// run is main without the process: testable.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainHelp)
		return exitUsage
	}
	var err error
	code := exitPass
	switch cmd, rest := args[0], args[1:]; cmd {
	case "check":
		code, err = cmdCheck(ctx, rest, stdout, stderr)
	case "list":
		err = cmdList(rest, stdout)
	case "lab":
		code, err = cmdLab(ctx, rest, stdout, stderr)
	case "mutants":
		code, err = cmdMutants(ctx, rest, stdout, stderr)
	case "mutate":
		code, err = cmdMutate(ctx, rest, stdout, stderr)
	case "demo":
		code, err = cmdDemo(ctx, rest, stdout, stderr)
	case "recheck":
		code, err = cmdRecheck(ctx, rest, stdout, stderr)
	case "replay":
		code, err = cmdReplay(ctx, rest, stdout, stderr)
	case "soak":
		code, err = cmdSoak(ctx, rest, stdout, stderr)
	case "merge":
		code, err = cmdMerge(ctx, rest, stdout, stderr)
	case "http":
		code, err = cmdHTTP(ctx, rest, stdout, stderr)
	case "spin": // internal: the soak's CPU hog (not in the help)
		return cmdSpin()
	case "version", "--version", "-version":
		err = cmdVersion(rest, stdout)
	case "worker": // internal: the harness's worker processes (not in the help)
		code, err = cmdWorker(ctx, rest, os.Stdin, stdout, stderr)
	case "help", "-h", "--help", "-help":
		// help of help (help help, --help --help) is the command list:
		// it called itself for ever, and the stack overflowed.
		if len(rest) > 0 && !slices.Contains([]string{"help", "-h", "--help", "-help"}, rest[0]) {
			return run(ctx, []string{rest[0], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, mainHelp)
	default:
		err = usagef("unknown command %q (commands: check, list, lab, mutants, mutate, demo, recheck, replay, soak, merge, http, version, help)", cmd)
	}
	if err != nil {
		if errors.Is(err, errHelp) {
			return exitPass
		}
		// Bad usage and setup errors alike: one line, exit 2.
		fmt.Fprintf(stderr, "idemcheck: %v\n", err)
		return exitUsage
	}
	return code
}
