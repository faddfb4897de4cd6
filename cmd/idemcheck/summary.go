package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/stores"
)

// sharedNotes returns the notes that more than one scenario made, word
// for word (a store that passes no failpoint inside its calls, said by
// every scheduled scenario), in the order first made, and the scenarios
// that made each note: the summary says such a note once, naming them.
func sharedNotes(scs []results.ScenarioResult) (shared []string, by map[string][]string) {
	by = map[string][]string{}
	for _, s := range scs {
		for _, n := range s.Notes {
			if id := s.ID().String(); !slices.Contains(by[n], id) {
				by[n] = append(by[n], id)
				if len(by[n]) == 2 {
					shared = append(shared, n)
				}
			}
		}
	}
	return shared, by
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// printSummary prints the run's summary; unwritten counts the run's files
// that could not be written (writeRun's errors, said on stderr), which the
// last line names beside the results directory: a directory said to hold
// the results must not be taken for a whole run's.
func printSummary(w io.Writer, sum *results.Summary, unwritten int) {
	fmt.Fprintf(w, "idemcheck check: store %s, variant %s, seed %d, %s, %s, LockTTL %s\n\n",
		sum.Store, sum.Variant, sum.Seed, plural(sum.Clients, "client"), plural(sum.Keys, "key"), sum.LockTTL)
	// Faults last: with every kind of fault, the column gets long.
	nw := len("scenario")
	for _, s := range sum.Scenarios {
		nw = max(nw, len(s.ID().String()))
	}
	fmt.Fprintf(w, "  %-*s %-7s %6s %12s %6s  %s\n", nw, "scenario", "verdict", "ops", "concurrency", "time", "faults")
	shared, sharedBy := sharedNotes(sum.Scenarios)
	ops := 0
	for _, s := range sum.Scenarios {
		ops += s.Ops
		if s.Verdict == check.Skipped {
			fmt.Fprintf(w, "  %-*s %-7s %s\n", nw, s.ID(), s.Verdict, s.Skipped)
			continue
		}
		fmt.Fprintf(w, "  %-*s %-7s %6d %12d %5.1fs  %s\n", nw, s.ID(), s.Verdict, s.Ops, s.MaxConcurrentBegins, s.Seconds, faults(s.Faults))
		if s.Verdict == check.Unknown {
			fmt.Fprintf(w, "  %-*s   undecided: %s\n", nw, "", s.WhyUndecided())
		}
		for _, n := range s.Notes {
			if len(sharedBy[n]) < 2 {
				fmt.Fprintf(w, "  %-*s   note: %s\n", nw, "", n)
			}
		}
	}
	for _, n := range shared {
		fmt.Fprintf(w, "\nnote of %s: %s\n", strings.Join(sharedBy[n], ", "), n)
	}
	var scheduled, shorter, own []string
	var ttl results.Duration
	// Each name once: --count repeats the scenarios.
	once := func(l []string, name string) []string {
		if slices.Contains(l, name) {
			return l
		}
		return append(l, name)
	}
	for _, s := range sum.Scenarios {
		if len(s.Schedule) > 0 {
			scheduled = once(scheduled, s.Name)
		}
		if s.OwnServer {
			own = once(own, s.Name)
		}
		if s.LockTTL != 0 && s.LockTTL != sum.LockTTL {
			shorter, ttl = once(shorter, s.Name), s.LockTTL
		}
	}
	if len(shorter) > 0 {
		fmt.Fprintf(w, "\nLockTTL %s in %s: a scheduler's tick waits LockTTL out on a server-clock store\n", ttl, strings.Join(shorter, ", "))
	}
	if len(own) > 0 {
		fmt.Fprintf(w, "\n%s ran on a %s server of their own, beside the shared scenarios: they pause and restart it\n", strings.Join(own, ", "), serverKind(sum.Store))
	}
	sayOwnRetention(w, sum)
	// A declaration no scenario exercises is said, not passed in silence.
	for _, s := range sum.Scenarios {
		if s.Check != nil && s.Check.Semantics.PerRequestLease {
			fmt.Fprintf(w, "\nnot exercised: the store declares per_request_lease, and no scenario of check sends a per-request lease (Request.Lease): idemtest's model test does\n")
			break
		}
	}
	if sum.OwnServerError != "" {
		fmt.Fprintf(w, "\nthe server-fault scenarios ran alone on the run's server: a server of their own could not start: %s\n", sum.OwnServerError)
	}
	_, err := os.Stat(filepath.Join(sum.Dir, "report.md"))
	report := err == nil // not where a full disk kept it from being written
	if len(scheduled) > 0 && report {
		fmt.Fprintf(w, "\nfault schedules of %s (a function of --seed %d): %s/report.md\n", strings.Join(scheduled, ", "), sum.Seed, sum.Dir)
	}
	for _, s := range sum.Scenarios {
		if len(s.Findings) > 0 {
			names := make([]string, 0, len(s.Findings))
			for k := range s.Findings {
				names = append(names, k)
			}
			sort.Strings(names)
			for i, k := range names {
				names[i] = fmt.Sprintf("%s %d", k, s.Findings[k])
			}
			fmt.Fprintf(w, "\nfindings of %s (expected effects, not violations): %s\n", s.ID(), strings.Join(names, ", "))
		}
		for _, c := range s.Checkers {
			if f := c.Finding(); f != "" {
				fmt.Fprintf(w, "\nfinding of %s (%s; a failure with --strict-%s): %s\n", s.ID(), c.Checker, c.Checker, f)
			}
		}
	}
	if len(sum.Violations) > 0 {
		fmt.Fprintf(w, "\nviolations (%d):\n", len(sum.Violations))
		for i, v := range sum.Violations {
			if i == 10 && report {
				fmt.Fprintf(w, "  … %d more in %s/report.md\n", len(sum.Violations)-10, sum.Dir)
				break
			}
			fmt.Fprintf(w, "  %s on %s: %s\n", v.Checker, v.Key, v.Detail)
		}
	}
	if m, _ := stores.LookupMutant(sum.Variant); m.Side == stores.ConfigSide && len(sum.Violations) > 0 {
		fmt.Fprintf(w, "\n%s is a configuration, not a bug in the store's code: %s\n", sum.Variant, m.Bug)
	}
	if sum.Verdict == check.Skipped {
		fmt.Fprintf(w, "\nnothing was judged: every scenario asked for was skipped on the %s store (exit 3), so this run is not a pass\n", sum.Store)
	}
	where := sum.Dir
	if unwritten > 0 {
		where += fmt.Sprintf(" (incomplete: %s failed, as said above; the verdict stands)", plural(unwritten, "report write"))
	}
	fmt.Fprintf(w, "\n%s: %s; %s, %.1fs elapsed. Results: %s\n",
		strings.ToUpper(string(sum.Verdict)), countVerdicts(sum.Scenarios), plural(ops, "store call"), sum.Seconds, where)
}

// countVerdicts says how the scenario runs ended, as a person counts them:
// "15 scenarios passed, 3 skipped", "1 scenario failed, 14 passed".
func countVerdicts(runs []results.ScenarioResult) string {
	n := map[check.Verdict]int{}
	for _, s := range runs {
		n[s.Verdict]++
	}
	var parts []string
	for _, v := range []struct {
		verdict check.Verdict
		word    string
	}{{check.Fail, "failed"}, {check.Unknown, "undecided"}, {check.Pass, "passed"}, {check.Skipped, "skipped"}} {
		if n[v.verdict] == 0 {
			continue
		}
		if len(parts) == 0 { // the first count names what is counted
			parts = append(parts, plural(n[v.verdict], "scenario")+" "+v.word)
			continue
		}
		parts = append(parts, fmt.Sprintf("%d %s", n[v.verdict], v.word))
	}
	if len(parts) == 0 {
		return "no scenario ran"
	}
	return strings.Join(parts, ", ")
}

// plural counts n of a thing: "1 client", "6 clients".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func faults(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	// Client faults first, then the rest by name.
	kinds := make([]string, 0, len(m))
	for k := range m {
		if k != "pause" && k != "crash" {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range append([]string{"pause", "crash"}, kinds...) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// sayOwnRetention names the scenarios that kept a retention of their own
// rather than the run's --retention (retention and store-faults wait
// theirs out; a replicated topology keeps its own): --retention 24h beside
// a failover that kept 5 minutes said nothing of it.
func sayOwnRetention(w io.Writer, sum *results.Summary) {
	if sum.Retention == 0 { // a run saved before runs said theirs
		return
	}
	byRetention := map[results.Duration][]string{}
	var order []results.Duration
	for _, s := range sum.Scenarios {
		if s.Retention == 0 || s.Retention == sum.Retention || s.Verdict == check.Skipped {
			continue
		}
		if _, ok := byRetention[s.Retention]; !ok {
			order = append(order, s.Retention)
		}
		if !slices.Contains(byRetention[s.Retention], s.Name) {
			byRetention[s.Retention] = append(byRetention[s.Retention], s.Name)
		}
	}
	for _, r := range order {
		fmt.Fprintf(w, "\nretention %s, not --retention %s, in the scenarios that keep their own: %s\n", r, sum.Retention, strings.Join(byRetention[r], ", "))
	}
}
