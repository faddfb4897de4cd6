package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

const listHelp = `Usage: idemcheck list [--json]

Lists the stores (where each keeps its data, whose clock it judges by),
the mutants, once each (the bug each re-creates, its side of the contract:
store, client or config, the stores it runs on, the scenario meant to kill
it and the checker that catches it), the scenarios and the checkers.
Every store also runs its correct variant, named "correct"; a client-side
mutant runs the correct store with clients that make the mistake.
`

type listing struct {
	Stores    []listStore  `json:"stores"`
	Mutants   []listMutant `json:"mutants"`
	Scenarios []listItem   `json:"scenarios"`
	Checkers  []listItem   `json:"checkers"`
}

type listStore struct {
	Name  string `json:"name"`
	Clock string `json:"clock"`
	Lives string `json:"lives"`
	// Variants: correct, then the store's own mutants (store side and
	// configuration); every client-side mutant runs on it too.
	Variants []string `json:"variants"`
}

// listMutant is one mutant, in structured fields.
type listMutant struct {
	Name string `json:"name"`
	// Side: "store", "client" or "config".
	Side string `json:"side"`
	// Stores it runs on.
	Stores   []string `json:"stores"`
	Scenario string   `json:"scenario"`
	// Checker is the checker expected to catch it (stores.Mutant's Checker).
	Checker string `json:"checker"`
	Bug     string `json:"bug"`
}

type listItem struct {
	Name string `json:"name"`
	Doc  string `json:"doc"`
}

func cmdList(args []string, stdout io.Writer) error {
	fs := newFlagSet("list", listHelp)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, listHelp, args, stdout); err != nil {
		return err
	}
	l := buildListing()
	if *asJSON {
		return printJSON(stdout, l)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Stores:")
	fmt.Fprintln(tw, "  name\tdata in\tclock\tvariants")
	for _, s := range l.Stores {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.Name, s.Lives, s.Clock, variantsCell(s.Variants))
	}
	tw.Flush()
	fmt.Fprintln(stdout, "  (and each runs every client-side mutant: the correct store with clients that make the mistake)")
	// Each mutant's row, then the bug it re-creates beneath it: columns
	// sized by hand, as a line between rows would break tabwriter's.
	head := []string{"name", "side", "stores", "scenario", "its demo fails"} // a hunt may name another checker first
	w := make([]int, len(head))
	rows := [][]string{head}
	for _, m := range l.Mutants {
		rows = append(rows, []string{m.Name, m.Side, storesCell(m.Stores), m.Scenario, m.Checker})
	}
	for _, r := range rows {
		for i, c := range r {
			w[i] = max(w[i], len(c))
		}
	}
	fmt.Fprintln(stdout, "\nMutants (each with the bug it re-creates):")
	for i, r := range rows {
		fmt.Fprintf(stdout, "  %-*s  %-*s  %-*s  %-*s  %s\n", w[0], r[0], w[1], r[1], w[2], r[2], w[3], r[3], r[4])
		if i > 0 {
			fmt.Fprintf(stdout, "      %s\n", l.Mutants[i-1].Bug)
		}
	}
	fmt.Fprintln(stdout, "\nScenarios:")
	for _, s := range l.Scenarios {
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, s.Doc)
	}
	tw.Flush()
	fmt.Fprintln(stdout, "\nCheckers:")
	for _, c := range l.Checkers {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Doc)
	}
	return tw.Flush()
}

// variantsCell counts a store's mutants by side, beside its correct
// variant: "correct and N store-side mutants", "correct, N store-side
// mutants and M configuration mutants" (a configuration mutant is not a
// bug in the store's code, so it is not counted as one).
func variantsCell(variants []string) string {
	var store, config int
	for _, v := range variants {
		switch m, _ := stores.LookupMutant(v); m.Side {
		case stores.StoreSide:
			store++
		case stores.ConfigSide:
			config++
		}
	}
	var parts []string
	if store > 0 {
		parts = append(parts, plural(store, "store-side mutant"))
	}
	if config > 0 {
		parts = append(parts, plural(config, "configuration mutant"))
	}
	switch len(parts) {
	case 0:
		return "correct only"
	case 1:
		return "correct and " + parts[0]
	}
	return "correct, " + parts[0] + " and " + parts[1]
}

// storesCell prints a mutant's stores: "all", or "all but X" when it
// misses one store.
func storesCell(names []string) string {
	all := stores.Backends()
	var missing []string
	for _, b := range all {
		if !slices.Contains(names, b) {
			missing = append(missing, b)
		}
	}
	switch {
	case len(missing) == 0:
		return "all"
	case len(missing) == 1 && len(all) > 2:
		return "all but " + missing[0]
	}
	return strings.Join(names, ",")
}

// buildListing gathers what list prints.
func buildListing() listing {
	var l listing
	backends := stores.Backends()
	for _, name := range backends {
		b, _ := stores.Lookup(name)
		l.Stores = append(l.Stores, listStore{Name: name, Clock: string(b.Clock), Lives: string(b.Lives), Variants: b.Variants()})
	}
	for _, m := range stores.Catalogue {
		var on []string
		for _, name := range backends {
			if m.RunsOn(name) {
				on = append(on, name)
			}
		}
		l.Mutants = append(l.Mutants, listMutant{Name: m.Name, Side: string(m.Side), Stores: on, Scenario: m.Scenario, Checker: m.Checker, Bug: m.Bug})
	}
	for _, s := range scenario.All {
		l.Scenarios = append(l.Scenarios, listItem{s.Name, s.Doc})
	}
	for _, c := range check.Docs {
		l.Checkers = append(l.Checkers, listItem{c.Name, c.Doc})
	}
	return l
}
