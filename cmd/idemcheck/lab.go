package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/lab"
	"github.com/idemcheck/idemcheck/stores"
)

const labHelp = `Usage: idemcheck lab [--store S] [--seed N] [--seeds N | --seeds A-B] [--orders N] [--json]

Re-runs the lab of the lesson card: orders sent to a real HTTP API on
127.0.0.1 through a lossy link (each attempt's reply is lost with
probability 1/4, drawn from the seed; the request has already run on the
server), the client retrying each order, for three clients: no-key (no
idempotency key), key-per-try (a new key per attempt) and same-key (one key
per order on every retry). Prints, per version, the charges the payment
provider made and the orders it charged more than once, beside the card's
figures where they compare (seed 1 with 100 orders: elsewhere the card
says nothing about the numbers), and checks the card's shape: no-key and
key-per-try make more charges than orders and charge some orders twice or
more; same-key charges every order exactly once. Runs on any store (the
API's idempotency store; default sqlite), a store in another language too:
--store exec --cmd "node store.js" (docs/protocol.md), as the card's own
TypeScript store would run.

--json prints {"seed", "orders", "versions": [{"name", "charges",
"double_charged", …}]}; with --seeds, {"store", "runs": [one per seed]}.

Exit codes: 0 the shape holds, 1 it does not, 2 bad usage or setup error,
3 undecided (no reply was lost: too few orders).
`

// labRuns is what --json prints with --seeds.
type labRuns struct {
	Store string        `json:"store"`
	Runs  []*lab.Result `json:"runs"`
	// Seeds is how many seeds were asked for; Interrupted says the run
	// was cut short, Runs holding the seeds that ran: the JSON of an
	// interrupted lab read as a whole one. A lab without --seeds prints
	// its one seed's result alone, or this, empty, when an interrupt came
	// before that seed ended.
	Seeds       int  `json:"seeds"`
	Interrupted bool `json:"interrupted,omitempty"`
	// Verdict is the lab's, as its exit code says (codeVerdict), as
	// check's, soak's and mutate's --json carry theirs.
	Verdict check.Verdict `json:"verdict"`
}

func cmdLab(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("lab", labHelp)
	store := fs.String("store", "sqlite", "store backend behind the API: "+strings.Join(stores.Backends(), ", ")+", or exec (with --cmd)")
	seed := fs.Int64("seed", 1, "seed of the lossy link")
	var seeds seedsFlag
	fs.Var(&seeds, "seeds", seedsHelp)
	orders := fs.Int("orders", 100, "orders per version")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	sf := addStoreFlags(fs)
	if err := parse(fs, labHelp, args, stdout); err != nil {
		return exitUsage, err
	}
	backend, c, err := sf.lookup(ctx, fs, store, nil)
	if err != nil {
		return exitUsage, err
	}
	from, n, err := seeds.resolve(*seed, given(fs, "seed"), 1, 1000)
	if err != nil {
		return exitUsage, err
	}
	to := from + int64(n) - 1
	if *orders < 1 {
		return exitUsage, usagef("--orders must be at least 1, got %d", *orders)
	}
	o := harness.Options{Backend: backend}
	cleanup, err := provision(ctx, &o, stderr, 0)
	if err != nil {
		return exitUsage, err
	}
	defer cleanup()
	addr := o.Addr
	rctx, _, protocolErr := execRun(ctx, c, nil)
	var results []*lab.Result
	interrupted := false
	for s := from; s <= to && s >= from; s++ { // s < from: past the largest seed, wrapped
		r, err := lab.Run(rctx, lab.Options{Backend: backend, Addr: addr, Seed: s, Orders: *orders})
		if err != nil && rctx.Err() != nil {
			interrupted = true // the seeds that ran are reported
			break
		}
		if err != nil {
			if perr := protocolErr(); perr != nil {
				return exitUsage, perr
			}
			return exitUsage, err
		}
		results = append(results, r)
	}
	// A store that broke the protocol stopped the run (exit 2), which is
	// no interrupt.
	if perr := protocolErr(); perr != nil {
		return exitUsage, perr
	}
	code := exitPass
	var problems []string
	if interrupted {
		code = exitUnknown
		problems = append(problems, fmt.Sprintf("INTERRUPTED: %d of %d seeds ran", len(results), n))
		if len(results) == 0 {
			if *asJSON {
				// Still one object: a --json reader got nothing at all
				// from a lab interrupted before its first seed ended.
				if err := printJSON(stdout, labRuns{Store: backend.Name, Runs: []*lab.Result{}, Seeds: n, Interrupted: true, Verdict: codeVerdict(code)}); err != nil {
					return exitUsage, err
				}
			}
			for _, p := range problems {
				fmt.Fprintf(stderr, "idemcheck lab: %s\n", p)
			}
			return code, nil
		}
	}
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
		var v any = struct {
			*lab.Result
			Verdict check.Verdict `json:"verdict"`
		}{results[0], codeVerdict(code)}
		if seeds.set {
			v = labRuns{Store: backend.Name, Runs: results, Seeds: n, Interrupted: interrupted, Verdict: codeVerdict(code)}
		}
		if err := printJSON(stdout, v); err != nil {
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

func printLab(w io.Writer, store string, orders int, results []*lab.Result, problems []string) {
	fmt.Fprintf(w, "idemcheck lab: %s per version on the %s store; each attempt's reply is lost with probability 1/4 (drawn from the seed) after the server ran it; the client retries.\n\n", plural(orders, "order"), store)
	// The card's figures sit beside a row only where they compare: the
	// card's seed and number of orders.
	comparable := func(r *lab.Result) bool { return r.Seed == lab.CardSeed && orders == lab.CardOrders }
	withCard := false
	for _, r := range results {
		withCard = withCard || comparable(r)
	}
	head := fmt.Sprintf("  %4s  %-12s %8s %22s", "seed", "version", "charges", "double-charged orders")
	if withCard {
		head += fmt.Sprintf("   card (npm run l4, seed %d, %d orders)", lab.CardSeed, lab.CardOrders)
	}
	fmt.Fprintln(w, head)
	lost := 0
	for _, r := range results {
		for _, v := range r.Versions {
			row := fmt.Sprintf("  %4d  %-12s %8d %22d", r.Seed, v.Name, v.Charges, v.DoubleCharged)
			if c := lab.Card[v.Name]; comparable(r) {
				row += fmt.Sprintf("   %4d %4d", c.Charges, c.DoubleCharged)
			}
			fmt.Fprintln(w, row)
		}
		lost += r.Version(lab.NoKey).LostReplies
	}
	replies := fmt.Sprintf("%d replies", lost)
	if lost == 1 {
		replies = "1 reply"
	}
	fmt.Fprintf(w, "\n%s lost in all, each retried; the same losses for every version.\n", replies)
	noAnswer, gaveUp := 0, 0
	for _, r := range results {
		for _, v := range r.Versions {
			noAnswer += v.NoAnswer
		}
		gaveUp += r.Version(lab.SameKey).LinkGaveUp
	}
	if noAnswer > 0 {
		fmt.Fprintf(w, "%d attempts got no answer on a healthy link as well (the machine, not the link: a loaded one drops connections), each retried as a lost reply is.\n", noAnswer)
	}
	if gaveUp > 0 {
		fmt.Fprintf(w, "%d same-key order(s) lost the reply of every attempt, and the client gave up unanswered: the store charged each once all the same.\n", gaveUp)
	}
	if withCard {
		fmt.Fprintf(w, "The counts differ from the card's because the losses are drawn from Go's math/rand, not the card's JavaScript random source, so seed %d here loses other replies; the card's claim is the shape, not the numbers.\n", lab.CardSeed)
	} else {
		fmt.Fprintf(w, "The card's figures are for seed %d with %d orders and do not compare with this run; its claim is the shape.\n", lab.CardSeed, lab.CardOrders)
	}
	if len(problems) == 0 {
		fmt.Fprintf(w, "SHAPE HOLDS on %s: no-key and key-per-try make more charges than orders and charge some orders twice or more; same-key charges every order exactly once.\n", seedsText(results))
		// Said so: a store with a SELECT-then-INSERT race, run here as
		// a user's own, held the shape and exited 0.
		fmt.Fprintln(w, "Not judged here: the lab's clients retry one order at a time through a lossy link; no two claims of a key race, no claim goes stale and none is taken over, no owner crashes. idemcheck check judges those.")
		return
	}
	for _, p := range problems {
		fmt.Fprintf(w, "%s\n", p)
	}
}

func seedsText(results []*lab.Result) string {
	switch len(results) {
	case 0:
		return "no seed" // none ran: said, where an empty table panicked
	case 1:
		return fmt.Sprintf("seed %d", results[0].Seed)
	}
	return fmt.Sprintf("seeds %d-%d", results[0].Seed, results[len(results)-1].Seed)
}
