package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/stores"
)

const demoHelp = `Usage: idemcheck demo <mutant> [--store S] [--json]

Runs the mutant's minimal interleaving on the real store, under the
controlled scheduler, and prints it step by step: which client ran which
statement (as the store runs it) and what it saw, and the harm done (a
double charge, a stale answer saved, a stuck key). Then runs the same
schedule on the correct store (less the mutant's extra read, which the
correct store does not make), where the second client gets 409 or a replay.

Mutants: ` + "%s" + `

Exit codes: 0 the demo ran; 2 bad usage or setup error.
`

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	help := fmt.Sprintf(demoHelp, strings.Join(hunt.DemoMutants(), ", "))
	mutant := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mutant, args = args[0], args[1:]
	}
	fs := newFlagSet("demo", help)
	store := fs.String("store", "sqlite", "store backend: "+strings.Join(stores.Backends(), ", "))
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	if err := parse(fs, help, args, stdout); err != nil {
		return exitUsage, err
	}
	if mutant == "" {
		return exitUsage, usagef("demo: name a mutant (%s)", strings.Join(hunt.DemoMutants(), ", "))
	}
	if !slices.Contains(hunt.DemoMutants(), mutant) {
		return exitUsage, usagef("demo: no demo for %q (demos: %s)", mutant, strings.Join(hunt.DemoMutants(), ", "))
	}
	backend, err := stores.Lookup(*store)
	if err != nil {
		return exitUsage, usageError{err.Error()}
	}
	o := harness.DefaultOptions()
	o.Backend = backend
	cleanup, err := provision(ctx, &o, stderr)
	if err != nil {
		return exitUsage, err
	}
	defer cleanup()
	info, bad, good, err := hunt.Demo(ctx, o, mutant)
	if err != nil {
		return exitUsage, err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return exitPass, enc.Encode(struct {
			*hunt.DemoInfo
			Mutant  *hunt.DemoRun `json:"mutant_run"`
			Correct *hunt.DemoRun `json:"correct_run"`
		}{info, bad, good})
	}
	fmt.Fprintf(stdout, "demo %s on %s (LockTTL %s)\n%s.\n", info.Mutant, info.Store, info.LockTTL, info.Story)
	if !info.Keyed {
		fmt.Fprintf(stdout, "The provider gets no idempotency key here, so the store alone stands between a retry and a second charge.\n")
	}
	printDemoRun(stdout, fmt.Sprintf("mutant store (%s):", info.Mutant), bad)
	printDemoRun(stdout, "correct store, same schedule (less the mutant's extra read):", good)
	return exitPass, nil
}

func printDemoRun(w io.Writer, title string, r *hunt.DemoRun) {
	fmt.Fprintf(w, "\n%s\n", title)
	for i, l := range r.Lines {
		who := l.Client
		if who == "" {
			who = "·"
		}
		if l.Result == "" {
			fmt.Fprintf(w, "  %2d %-2s %s\n", i+1, who, l.Text)
			continue
		}
		if len([]rune(l.Text))+len([]rune(l.Result)) < 112 {
			fmt.Fprintf(w, "  %2d %-2s %s  → %s\n", i+1, who, l.Text, l.Result)
			continue
		}
		fmt.Fprintf(w, "  %2d %-2s %s\n          → %s\n", i+1, who, l.Text, l.Result)
	}
	fmt.Fprintf(w, "  answers:\n")
	for _, a := range r.Answers {
		fmt.Fprintf(w, "    %s\n", a)
	}
	fmt.Fprintf(w, "  => %s\n", r.Harm)
	if len(r.Caught) > 0 {
		fmt.Fprintf(w, "     caught by: %s\n", strings.Join(r.Caught, ", "))
	}
}
