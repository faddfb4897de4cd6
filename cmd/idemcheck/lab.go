package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/lab"
	"github.com/idemcheck/idemcheck/stores"
)

const labHelp = `Usage: idemcheck lab [--store S] [--seed N | --seeds A-B] [--orders N] [--json]

Re-runs the lab of the lesson card: orders sent to a real HTTP API on
127.0.0.1 through a lossy link (each attempt's reply is lost with
probability 1/4, drawn from the seed; the request has already run on the
server), the client retrying each order, for three clients: no-key (no
idempotency key), key-per-try (a new key per attempt) and same-key (one key
per order on every retry). Prints, per version, the charges the payment
provider made and the orders it charged more than once, beside the card's
figures (npm run l4, seed 1), and checks the card's shape: no-key and
key-per-try make more charges than orders and charge some orders twice or
more; same-key charges every order exactly once. Runs on any store (the
API's idempotency store; default sqlite).

--json prints {"seed", "orders", "versions": [{"name", "charges",
"double_charged", …}]}; with --seeds, {"store", "runs": [one per seed]}.

Exit codes: 0 the shape holds, 1 it does not, 2 bad usage or setup error,
3 undecided (no reply was lost: too few orders).
`

// labRuns is what --json prints with --seeds.
type labRuns struct {
	Store string        `json:"store"`
	Runs  []*lab.Result `json:"runs"`
}

func cmdLab(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("lab", labHelp)
	store := fs.String("store", "sqlite", "store backend behind the API: "+strings.Join(stores.Backends(), ", "))
	seed := fs.Int64("seed", 1, "seed of the lossy link")
	seeds := fs.String("seeds", "", "a range of seeds, e.g. 1-10 (instead of --seed)")
	orders := fs.Int("orders", 100, "orders per version")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	if err := parse(fs, labHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	backend, err := stores.Lookup(*store)
	if err != nil {
		return exitUsage, usageError{err.Error()}
	}
	from, to := *seed, *seed
	if *seeds != "" {
		if from, to, err = seedRange(*seeds); err != nil {
			return exitUsage, err
		}
	}
	if *orders < 1 {
		return exitUsage, usagef("--orders must be at least 1, got %d", *orders)
	}
	o := harness.Options{Backend: backend}
	cleanup, err := provision(ctx, &o, stderr)
	if err != nil {
		return exitUsage, err
	}
	defer cleanup()
	addr := o.Addr
	var results []*lab.Result
	for s := from; s <= to; s++ {
		r, err := lab.Run(ctx, lab.Options{Backend: backend, Addr: addr, Seed: s, Orders: *orders})
		if err != nil {
			return exitUsage, err
		}
		results = append(results, r)
	}
	code := exitPass
	var problems []string
	for _, r := range results {
		switch err := r.Shape(); {
		case errors.Is(err, lab.ErrShape):
			code = exitFail
			problems = append(problems, "SHAPE BROKEN: "+err.Error())
		case errors.Is(err, lab.ErrNoLoss):
			if code == exitPass {
				code = exitUnknown
			}
			problems = append(problems, fmt.Sprintf("UNDECIDED: seed %d: %v", r.Seed, err))
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		var v any = results[0]
		if *seeds != "" {
			v = labRuns{Store: backend.Name, Runs: results}
		}
		if err := enc.Encode(v); err != nil {
			return exitUsage, err
		}
		for _, p := range problems {
			fmt.Fprintf(stderr, "idemcheck lab: %s\n", p)
		}
		return code, nil
	}
	printLab(stdout, backend.Name, *orders, results, problems)
	return code, nil
}

// seedRange parses "A-B" (or "A").
func seedRange(s string) (int64, int64, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	from, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	to, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err1 != nil || err2 != nil || from > to {
		return 0, 0, usagef("--seeds wants a range like 1-10, got %q", s)
	}
	if to-from >= 1000 {
		return 0, 0, usagef("--seeds %s: at most 1000 seeds at once", s)
	}
	return from, to, nil
}

func printLab(w io.Writer, store string, orders int, results []*lab.Result, problems []string) {
	fmt.Fprintf(w, "idemcheck lab: %d orders per version on the %s store; each attempt's reply is lost with probability 1/4 (drawn from the seed) after the server ran it; the client retries.\n\n", orders, store)
	fmt.Fprintf(w, "  %4s  %-12s %8s %22s   %s\n", "seed", "version", "charges", "double-charged orders", "card (npm run l4, seed 1)")
	lost := 0
	for _, r := range results {
		for _, v := range r.Versions {
			c := lab.Card[v.Name]
			fmt.Fprintf(w, "  %4d  %-12s %8d %22d   %4d %4d\n", r.Seed, v.Name, v.Charges, v.DoubleCharged, c.Charges, c.DoubleCharged)
		}
		lost += r.Version(lab.NoKey).LostReplies
	}
	fmt.Fprintf(w, "\n%d replies lost in all, each retried; the same losses for every version.\n", lost)
	if len(problems) == 0 {
		fmt.Fprintf(w, "SHAPE HOLDS on %s: no-key and key-per-try make more charges than orders and charge some orders twice or more; same-key charges every order exactly once.\n", seedsText(results))
		return
	}
	for _, p := range problems {
		fmt.Fprintf(w, "%s\n", p)
	}
}

func seedsText(results []*lab.Result) string {
	if len(results) == 1 {
		return fmt.Sprintf("seed %d", results[0].Seed)
	}
	return fmt.Sprintf("seeds %d-%d", results[0].Seed, results[len(results)-1].Seed)
}
