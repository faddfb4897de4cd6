package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

const listHelp = `Usage: idemcheck list [--json]

Lists the stores and their variants (correct and each mutant, with the bug
it re-creates and the scenario meant to kill it), the scenarios and the
checkers.
`

type listing struct {
	Stores    []listStore `json:"stores"`
	Scenarios []listItem  `json:"scenarios"`
	Checkers  []listItem  `json:"checkers"`
}

type listStore struct {
	Name     string     `json:"name"`
	Clock    string     `json:"clock"`
	Variants []listItem `json:"variants"`
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
	var l listing
	for _, name := range stores.Backends() {
		b, _ := stores.Lookup(name)
		s := listStore{Name: name, Clock: string(b.Clock)}
		s.Variants = append(s.Variants, listItem{stores.Correct, "the correct store"})
		for _, m := range b.Mutants {
			mu := stores.Mutants[m]
			s.Variants = append(s.Variants, listItem{m, fmt.Sprintf("%s (killed by scenario %s)", mu.Bug, mu.Scenario)})
		}
		for _, cm := range workload.ClientMutants { // the correct store, with clients that make the mistake
			s.Variants = append(s.Variants, listItem{cm.Name, fmt.Sprintf("client-side: %s (killed by scenario %s)", cm.Bug, cm.Scenario)})
		}
		l.Stores = append(l.Stores, s)
	}
	for _, s := range scenario.All {
		l.Scenarios = append(l.Scenarios, listItem{s.Name, s.Doc})
	}
	for _, c := range check.Docs {
		l.Checkers = append(l.Checkers, listItem{c.Name, c.Doc})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	fmt.Fprintln(stdout, "Stores and variants:")
	for _, s := range l.Stores {
		fmt.Fprintf(stdout, "  %s (%s clock)\n", s.Name, s.Clock)
		for _, v := range s.Variants {
			fmt.Fprintf(stdout, "    %-24s %s\n", v.Name, v.Doc)
		}
	}
	fmt.Fprintln(stdout, "\nScenarios:")
	for _, s := range l.Scenarios {
		fmt.Fprintf(stdout, "  %-10s %s\n", s.Name, s.Doc)
	}
	fmt.Fprintln(stdout, "\nCheckers:")
	for _, c := range l.Checkers {
		fmt.Fprintf(stdout, "  %-20s %s\n", c.Name, c.Doc)
	}
	return nil
}
