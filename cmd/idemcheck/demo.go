package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/internal/wholefile"
	"github.com/idemcheck/idemcheck/stores"
)

const demoHelp = `Usage: idemcheck demo <mutant> [--store S] [--json] [--html FILE]

Shows a mutant's bug happen, step by step, on the real store, then the
same schedule on the correct store.

Mutants with a scripted interleaving (%s) run it under the controlled
scheduler: which client ran which statement, in full as the store runs it,
and what it saw. Every other mutant is hunted with the scenario meant to
kill it, its killing episode shrunk to the shortest one found, and that
episode (the same interleaving, or the same round and seed) then runs on
the correct store with correct clients. Either way the demo ends with the
harm done (a double charge, a lost or overwritten answer, a stuck key) and
the checkers that caught it; its last line says both. Between steps, a
line marked ⇄ says where the scheduler switched: the failpoint the client
that ran before waits at, and the one the next client runs from.

--html FILE also writes the demo as a page: a lane per client, the key's
row between the lanes, the switches between the steps.

The store defaults to sqlite, or to the one backend a mutant belongs to
(%s).

Mutants: %s

Exit codes: 0 the demo ran; 1 no checker caught the mutant (for a demo a
hunt finds, within the hunt's budget: NOT CAUGHT); 2 bad usage or
setup error; 3 interrupted, or the correct store's run of the same schedule
went wrong too (the demo then separates nothing).
` + execHelp

// allMutants lists every mutant idemcheck list shows, once each, in the
// order of stores.Catalogue (store side, then configuration, then client
// side).
func allMutants() []string {
	var out []string
	for _, m := range stores.Catalogue {
		out = append(out, m.Name)
	}
	return out
}

// homeStore is the store a mutant's demo runs on by default: sqlite,
// unless the mutant does not exist there; then the first backend it
// belongs to (request-clock: postgres, a server-clock store).
func homeStore(mutant string) string {
	if m, _ := stores.LookupMutant(mutant); len(m.On) > 0 && !slices.Contains(m.On, "sqlite") {
		return m.On[0]
	}
	return "sqlite"
}

// ownHomes names the mutants of one backend each, with that backend, for
// the demo's help.
func ownHomes() string {
	var out []string
	for _, m := range stores.Catalogue {
		if home := homeStore(m.Name); home != "sqlite" {
			out = append(out, m.Name+": "+home)
		}
	}
	return strings.Join(out, "; ")
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	all := allMutants()
	help := fmt.Sprintf(demoHelp, strings.Join(hunt.ScriptedDemos(), ", "), ownHomes(), strings.Join(all, ", "))
	fs := newFlagSet("demo", help)
	store := fs.String("store", "", "store backend: "+strings.Join(stores.Backends(), ", ")+", or exec (with --cmd) (default: sqlite, or the mutant's own backend)")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	htmlOut := fs.String("html", "", "also write the demo as a step-by-step page to this file (a lane per client, the key's row between, the scheduler's switches)")
	sf := addStoreFlags(fs)
	pos, err := parseArgs(fs, help, args, stdout, 1)
	if err != nil {
		return exitUsage, err
	}
	if len(pos) == 0 {
		return exitUsage, usagef("demo: name a mutant: %s", strings.Join(all, ", "))
	}
	mutant := pos[0]
	if !slices.Contains(all, mutant) {
		if *store == "exec" {
			// A store in another language named one of its own variants:
			// demo scripts only the bugs it knows (a TypeScript store's
			// "ms-unit" got the list of the built-in stores' mutants).
			return exitUsage, usagef("demo: %q is not a bug demo knows; demo scripts these: %s (an exec store that declares one of them among its hello's variants gets its scripted demo); check a variant of your own with idemcheck check --store exec --cmd ... --variant %s", mutant, strings.Join(hunt.ScriptedDemos(), ", "), mutant)
		}
		return exitUsage, usagef("demo: no mutant %q; the mutants: %s", mutant, strings.Join(all, ", "))
	}
	if *store == "" {
		*store = homeStore(mutant)
	}
	backend, ex, err := sf.lookup(ctx, fs, store, nil)
	if err != nil {
		return exitUsage, err
	}
	if known := hunt.MutantsFor(backend); !slices.Contains(known, mutant) {
		if ex != nil && slices.Contains(hunt.ScriptedDemos(), mutant) {
			return exitUsage, usagef("demo: the exec store %s does not declare %q among its hello's variants: declare it there, as the store with that bug planted, to get its scripted demo (docs/protocol.md); its variants and the client-side bugs: %s", ex.Hello.Name, mutant, strings.Join(known, ", "))
		}
		return exitUsage, usagef("demo: store %s has no mutant %q (try --store %s); its mutants: %s", backend.Name, mutant, homeStore(mutant), strings.Join(known, ", "))
	}
	o := harness.DefaultOptions()
	o.Backend = backend
	cleanup, err := provision(ctx, &o, stderr, 0)
	if err != nil {
		return exitUsage, err
	}
	defer cleanup()
	rctx, _, protocolErr := execRun(ctx, ex, nil)
	info, bad, good, err := hunt.Demo(rctx, o, mutant)
	if perr := protocolErr(); perr != nil {
		return exitUsage, perr
	}
	if ctx.Err() != nil {
		// Interrupted: what ran is said, and nothing is judged (exit 3),
		// never a setup error, nor a mutant that survived a cut run.
		ran := "neither run had finished"
		switch {
		case bad != nil && good == nil:
			ran = fmt.Sprintf("the mutant's run had finished (%d charges of the order: %s); the correct store's had not", bad.Charges, bad.Harm)
		case bad != nil:
			ran = "the runs may have been cut (the scheduler stops at an interrupt), so neither is judged"
		}
		line := fmt.Sprintf("INTERRUPTED: the demo of %s was cut short: %s", mutant, ran)
		if *asJSON { // one object still, as a finished demo's
			return exitUnknown, printJSON(stdout, struct {
				Mutant      string `json:"mutant"`
				Interrupted bool   `json:"interrupted"`
				Verdict     string `json:"verdict"`
			}{mutant, true, line})
		}
		fmt.Fprintln(stdout, line)
		return exitUnknown, nil
	}
	if errors.Is(err, hunt.ErrNotCaught) {
		// The hunt ran its budget out: the demo's answer, not a setup
		// error (exit 1, as for a scripted demo no checker caught).
		fmt.Fprintf(stdout, "NOT CAUGHT: %s\n", strings.TrimPrefix(err.Error(), hunt.ErrNotCaught.Error()+": "))
		return exitFail, nil
	}
	if err != nil {
		return exitUsage, err
	}
	verdict, code := demoVerdict(info, bad, good)
	if *htmlOut != "" {
		if err := writeDemoHTML(*htmlOut, info, bad, good); err != nil {
			return exitUsage, err
		}
		fmt.Fprintf(stderr, "idemcheck: wrote %s\n", *htmlOut)
	}
	if *asJSON {
		return code, printJSON(stdout, struct {
			*hunt.DemoInfo
			Mutant  *hunt.DemoRun `json:"mutant_run"`
			Correct *hunt.DemoRun `json:"correct_run"`
			Verdict string        `json:"verdict"`
		}{info, bad, good, verdict})
	}
	fmt.Fprintf(stdout, "demo %s (%s side) on %s, LockTTL %s\n%s.\n", info.Mutant, info.Side, info.Store, info.LockTTL, capitalize(info.Story))
	if info.Unscripted != "" {
		fmt.Fprintf(stdout, "%s; below, the killing episode (shrunk), then the same on the correct store.\n", capitalize(info.Unscripted))
	} else if info.Found {
		fmt.Fprintf(stdout, "No scripted interleaving: scenario %s hunted it; below, the killing episode (shrunk), then the same on the correct store.\n", info.Scenario)
	} else if !info.Keyed {
		fmt.Fprintf(stdout, "The provider gets no idempotency key here, so the store alone stands between a retry and a second charge.\n")
	}
	printDemoRun(stdout, fmt.Sprintf("mutant (%s):", info.Mutant), bad)
	title := "correct store, same schedule (less the mutant's extra read):"
	if info.Found {
		title = "correct store and clients, same " + map[bool]string{true: "interleaving", false: "round and seed"}[len(good.Lines) > 0] + ":"
	}
	printDemoRun(stdout, title, good)
	fmt.Fprintf(stdout, "\n%s\n", verdict)
	return code, nil
}

// writeDemoHTML writes the demo's page to path.
func writeDemoHTML(path string, info *hunt.DemoInfo, bad, good *hunt.DemoRun) error {
	// Whole or not at all: a full disk cut a page short.
	if err := wholefile.Write(path, func(w io.Writer) error { return hunt.WriteDemoHTML(w, info, bad, good) }); err != nil {
		return fmt.Errorf("demo --html: %v", err)
	}
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// demoWidth is where a demo's statements wrap.
const demoWidth = 100

func printDemoRun(w io.Writer, title string, r *hunt.DemoRun) {
	fmt.Fprintf(w, "\n%s\n", title)
	for i, l := range r.Lines {
		who := l.Client
		if who == "" {
			who = "·"
		}
		if l.Switch != "" {
			fmt.Fprintf(w, "         ⇄ %s\n", l.Switch)
		}
		text := wrap(l.Text, demoWidth, "         ")
		switch {
		case l.Result == "":
			fmt.Fprintf(w, "  %2d %-3s %s\n", i+1, who, text)
		case !strings.Contains(text, "\n") && len([]rune(text))+len([]rune(l.Result)) < demoWidth:
			fmt.Fprintf(w, "  %2d %-3s %s  → %s\n", i+1, who, text, l.Result)
		default:
			fmt.Fprintf(w, "  %2d %-3s %s\n         → %s\n", i+1, who, text, l.Result)
		}
		if l.Row != "" {
			fmt.Fprintf(w, "         row: %s\n", l.Row)
		}
	}
	if len(r.Trace) > 0 {
		fmt.Fprintf(w, "  the order's history (each call and its answer, the work, the provider's charges):\n")
		for _, t := range r.Trace {
			fmt.Fprintf(w, "  %s\n", t)
		}
	}
	if len(r.Answers) > 0 {
		fmt.Fprintf(w, "  answers:\n")
		for _, a := range r.Answers {
			fmt.Fprintf(w, "    %s\n", a)
		}
	}
	fmt.Fprintf(w, "  => %s\n", r.Harm)
	if len(r.Caught) > 0 {
		fmt.Fprintf(w, "     caught by: %s\n", strings.Join(r.Caught, ", "))
	}
}

// wrap breaks s at spaces into lines of at most width runes, the lines
// after the first indented.
func wrap(s string, width int, indent string) string {
	words := strings.Fields(s)
	var lines []string
	cur := ""
	for _, wd := range words {
		if cur != "" && len([]rune(cur))+1+len([]rune(wd)) > width {
			lines = append(lines, cur)
			cur = wd
			continue
		}
		if cur != "" {
			cur += " "
		}
		cur += wd
	}
	lines = append(lines, cur)
	return strings.Join(lines, "\n"+indent)
}

// demoVerdict is a demo's last line and its exit code: 0 when a checker
// caught the mutant and the correct store's run of the same schedule was
// judged and did no harm; 1 when no checker caught the mutant; 3 when the
// correct store's run went wrong too or was not judged whole, which
// leaves the demo showing nothing about the mutant.
func demoVerdict(info *hunt.DemoInfo, bad, good *hunt.DemoRun) (string, int) {
	verdict := hunt.Verdict(info, bad, good)
	code := exitPass
	if len(bad.Caught) == 0 {
		code = exitFail
	}
	switch {
	case good.Spoiled():
		code = exitUnknown
		why := ""
		if good.Outran != "" {
			why = ": " + good.Outran
		}
		verdict += "\nUNDECIDED: the correct store's run went wrong as well (" + strings.Join(good.Caught, ", ") +
			")" + why + "; the demo does not separate the mutant from the correct store; run it again on a less loaded machine"
	case good.NotJudged != "":
		code = exitUnknown
		verdict += "\nUNDECIDED: the correct store's run of the same schedule was not judged whole (" + good.NotJudged +
			"): the demo does not separate the mutant from the correct store; run it again"
	}
	return verdict, code
}
