package main

import (
	"context"
	"fmt"
	"github.com/idemcheck/idemcheck/harness/httpreport"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/results"
)

const replayHelp = `Usage: idemcheck replay [--scenario S] <run-dir>

Runs the failing episodes of a saved run's scheduled scenarios (sched-*)
again, on a fresh store of the same backend and variant, on the same
interleaving: every choice the scheduler made was saved in summary.json
and is taken back in order. Prints each episode step by step (who ran,
which statement, what it returned) and the checkers that fail now.

Only scheduled scenarios can be replayed this way; for the others,
idemcheck recheck re-judges the saved history, and the reproduce line that
check prints runs the scenario again with its seed.

Exit codes: 0 the failures did not come back, 1 they did, 2 bad usage or
setup error, 3 interrupted before every episode was replayed.
`

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := newFlagSet("replay", replayHelp)
	only := fs.String("scenario", "", "replay only this scenario")
	line := fs.String("cmd", "", "for a run of an exec store: the command that starts the store (default: the saved run's --cmd)")
	pos, err := parseArgs(fs, replayHelp, args, stdout, 1)
	if err != nil {
		return exitUsage, err
	}
	dir := ""
	if len(pos) > 0 {
		dir = pos[0]
	}
	if dir == "" {
		return exitUsage, usagef("replay: name a run directory (results/latest, or one under results/)")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return exitUsage, usagef("replay: %s is not a run directory", dir)
	}
	if crashed(dir) {
		// No summary.json, a journal: its choices are in no file yet.
		how := howEnded(dir, "its process died before it wrote its files")
		return exitUsage, fmt.Errorf("replay: the run in %s has no summary.json (%s): `idemcheck recheck %s` recovers it from its journal, then replay it", dir, how, dir)
	}
	// Another command's run: said as such, where the loader's errors
	// ("unknown store", a JSON field of another type) were printed.
	cmd := map[string]string{httpreport.JournalNote: "http", mutantsKind: "mutants", mutateKind: "mutate", soakKind: "soak"}[journalKind(filepath.Join(dir, harness.JournalFile))]
	if cmd == "" && httpSummary(dir) != nil {
		cmd = "http" // a finished one keeps no journal
	}
	if cmd != "" {
		return exitUsage, usagef("replay: %s is a run of idemcheck %s: replay runs a check run's failing scheduled episodes again (a soak names the directory of each run that did not pass; recheck re-judges any saved run)", dir, cmd)
	}
	saved, done, err := harness.LoadRunSpilled(ctx, dir)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(stdout, "UNDECIDED: interrupted while %s was loaded: nothing was replayed\n", dir)
		return exitUnknown, nil
	}
	if err != nil {
		return exitUsage, fmt.Errorf("replay: %v", err)
	}
	defer done()
	backend, ex, err := replayBackend(ctx, saved.Store, *line, saved.Argv)
	if err != nil {
		return exitUsage, fmt.Errorf("replay: %v", err)
	}
	ctx, _, protocolErr := execRun(ctx, ex, nil)
	defer func() {
		if perr := protocolErr(); perr != nil {
			fmt.Fprintf(stderr, "idemcheck: replay: %v\n", perr)
		}
	}()
	type job struct {
		res  results.ScenarioResult
		keys []string
	}
	var jobs []job
	for _, s := range saved.Scenarios {
		if s.Verdict != check.Fail || len(s.Episodes) == 0 || s.Check == nil || (*only != "" && s.Name != *only && s.ID().String() != *only) {
			continue
		}
		var keys []string
		for _, v := range s.Violations {
			if !slices.Contains(keys, v.Key) {
				keys = append(keys, v.Key)
			}
		}
		jobs = append(jobs, job{res: s, keys: keys})
	}
	if len(jobs) == 0 && *only != "" {
		// Said apart: a name the run does not hold, one that did not fail,
		// one that is not scheduled (all three read as the run having
		// nothing to replay).
		var failing []string
		for _, s := range saved.Scenarios {
			if s.Verdict == check.Fail && len(s.Episodes) > 0 && s.Check != nil {
				failing = append(failing, s.ID().String())
			}
		}
		why := "no scenario of the run is named so"
		for _, s := range saved.Scenarios {
			if s.Name == *only || s.ID().String() == *only {
				why = "it did not fail"
				if s.Verdict == check.Fail {
					why = "it is not scheduled (only the sched-* scenarios replay)"
				}
				break
			}
		}
		return exitUsage, usagef("replay: --scenario %s: %s; the run's failing scheduled scenarios: %s", *only, why, listOrNone(failing))
	}
	if len(jobs) == 0 {
		return exitUsage, usagef("replay: %s has no failing scheduled scenario to replay (recheck re-judges any saved run)", dir)
	}
	o := harness.DefaultOptions()
	o.Backend, o.Variant, o.Seed, o.Clients, o.Keys = backend, saved.Variant, saved.Seed, saved.Clients, saved.Keys
	cleanup, err := provision(ctx, &o, stderr, 0)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(stdout, "UNDECIDED: interrupted while the store was set up: nothing was replayed\n")
		return exitUnknown, nil
	}
	if err != nil {
		return exitUsage, err
	}
	defer cleanup()
	back, replayed, planned := 0, 0, 0
	for _, j := range jobs {
		for _, ep := range j.res.Episodes {
			if len(j.keys) == 0 || slices.Contains(j.keys, ep.Order) {
				planned++
			}
		}
	}
replaying:
	for _, j := range jobs {
		oo := o
		oo.LockTTL, oo.Retention = j.res.Check.LockTTL, j.res.Check.Retention
		for _, ep := range j.res.Episodes {
			if len(j.keys) > 0 && !slices.Contains(j.keys, ep.Order) {
				continue
			}
			got, err := hunt.Replay(ctx, oo, j.res.Name, ep)
			if ctx.Err() != nil {
				// An episode the interrupt cut short proves nothing
				// either way: its calls ended in the cancel, and a
				// failure that did not come back was not given the
				// chance to.
				fmt.Fprintf(stdout, "%s, episode on %s: cut short by the interrupt, not judged\n\n", j.res.ID(), ep.Order)
				break replaying
			}
			if err != nil {
				return exitUsage, err
			}
			replayed++
			var failing []string
			for _, c := range got.Checks {
				if c.Verdict == check.Fail {
					failing = append(failing, c.Checker)
				}
			}
			fmt.Fprintf(stdout, "%s, episode on %s (%d choices):\n", j.res.ID(), ep.Order, len(ep.Choices))
			for _, l := range hunt.DescribeLog(got.Log) {
				fmt.Fprintf(stdout, "  %s\n", l)
			}
			if len(failing) > 0 {
				back++
				fmt.Fprintf(stdout, "  => fails again: %s\n\n", strings.Join(failing, ", "))
			} else if ep.Outran(oo.LockTTL) { // scenario.ClockOutran: the run's interleaving was the machine's too
				fmt.Fprintf(stdout, "  => passes now; the run's episode ran %v of real time between the clock's ticks, past LockTTL (%v), "+
					"so a claim may have gone stale there by the server's clock, which this replay need not repeat\n\n",
					ep.Unticked.Round(time.Millisecond), oo.LockTTL)
			} else {
				fmt.Fprintf(stdout, "  => passes now\n\n")
			}
		}
	}
	return replayVerdict(stdout, back, replayed, planned, ctx.Err() != nil), nil
}

// replayVerdict prints replay's last line and gives its exit code: a
// failure that came back is a failure, interrupted or not; otherwise an
// interrupted replay is undecided, never a pass, since the episodes it
// did not replay (or replayed only in part) were not judged.
func replayVerdict(w io.Writer, back, replayed, planned int, interrupted bool) int {
	switch {
	case back > 0 && interrupted:
		fmt.Fprintf(w, "FAIL: %d episode(s) failed again on the same interleaving (INTERRUPTED: %d of %d replayed)\n", back, replayed, planned)
		return exitFail
	case back > 0:
		fmt.Fprintf(w, "FAIL: %d episode(s) failed again on the same interleaving\n", back)
		return exitFail
	case interrupted:
		fmt.Fprintf(w, "INTERRUPTED: %d of %d episode(s) replayed, none failed again; the others were not judged\n", replayed, planned)
		return exitUnknown
	}
	fmt.Fprintf(w, "PASS: no replayed episode failed\n")
	return exitPass
}
