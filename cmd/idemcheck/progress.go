package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/mutate"
	"github.com/idemcheck/idemcheck/harness/scenario"
)

// How a run says where it is: a live line on a terminal, plain lines in
// a log.

// nameWidth is the longest scenario name, so the progress line's columns
// stay put from one scenario to the next.
func nameWidth() int {
	w := 0
	for _, s := range scenario.All {
		w = max(w, len(s.Name))
	}
	return w
}

// isTerminal reports whether w is a terminal that can redraw a line
// (progress goes only there): not one whose TERM is dumb (an editor's
// shell, a CI log viewer), which shows "\r\033[K" as it is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// logProgressEvery is how often a long run writes where it is to a log.
const logProgressEvery = 30 * time.Second

// logProgress writes a long run's progress to a log, one line at a time:
// each scenario as it ends, and while one runs, its calls so far, or
// that it is being checked once its workload has ended (the ticks at its
// start, with nothing yet to say, are left out).
func logProgress(w io.Writer, p harness.Progress) {
	switch {
	case p.Done && p.Skipped != "":
		fmt.Fprintf(w, "idemcheck: [%d/%d] %s skipped: %s\n", p.Index, p.Total, p.Scenario, p.Skipped)
	case p.Done:
		fmt.Fprintf(w, "idemcheck: [%d/%d] %s done, %s elapsed, %d violations so far\n", p.Index, p.Total, p.Scenario, p.Elapsed.Round(time.Second), p.Violations)
	case p.Checking:
		fmt.Fprintf(w, "idemcheck: [%d/%d] %s checking (the final probe, then the checkers): %d calls, %d faults, %s elapsed\n",
			p.Index, p.Total, p.Scenario, p.Ops, p.Faults, p.Elapsed.Round(time.Second))
	case p.Ops > 0:
		fmt.Fprintf(w, "idemcheck: [%d/%d] %s running: %d calls, %d faults, %s elapsed\n", p.Index, p.Total, p.Scenario, p.Ops, p.Faults, p.Elapsed.Round(time.Second))
	}
}

// overrun is a check run's progress beside its forecast: each Progress
// goes to the progress it wraps (next: the live line, the log's lines, or
// none), and once the run has taken twice its forecast and half a minute
// more, one line says so and why that may be; a run with no progress of
// its own (piped, its forecast under a minute) then writes the log's
// lines from there on, so that a run far past its forecast is never
// silent (a store's slow calls ran a forecast of seconds for 11 minutes
// with nothing said).
type overrun struct {
	w        io.Writer
	terminal bool
	forecast time.Duration
	why      string
	next     func(harness.Progress)

	mu   sync.Mutex
	said bool
	last time.Duration // when the last log line was written, once said
}

// pastForecast reports, once, whether a run that has taken elapsed is
// past twice its forecast and half a minute, where a run says so (a
// check run's overrun, a soak's drawProgress): true the first time, the
// terminal's live line cleared for the line that says it.
func pastForecast(w io.Writer, terminal bool, forecast, elapsed time.Duration, said *bool) bool {
	if *said || elapsed <= 2*forecast+30*time.Second {
		return false
	}
	*said = true
	if terminal {
		fmt.Fprint(w, "\r\033[K")
	}
	return true
}

// report takes one Progress of the run.
func (o *overrun) report(p harness.Progress) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if pastForecast(o.w, o.terminal, o.forecast, p.Elapsed, &o.said) {
		fmt.Fprintf(o.w, "idemcheck: this run has taken %s, past twice its forecast of %s and half a minute: %s\n",
			p.Elapsed.Round(time.Second), o.forecast.Round(time.Second), o.why)
	}
	switch {
	case o.next != nil:
		o.next(p)
	case o.said && (p.Done || p.Elapsed >= o.last+logProgressEvery):
		o.last = p.Elapsed
		logProgress(o.w, p)
	}
}

// printProgress draws a one-line progress bar on the terminal, replaced
// in place (the summary table that follows is the only record): scenarios
// done of all, the current scenario (or why it was skipped), its store
// calls and faults, the violations found so far, the time elapsed and an
// estimate of the time left (from the pace so far).
func printProgress(w io.Writer, p harness.Progress) {
	const width = 20
	done := p.Index - 1
	if p.Done {
		done = p.Index
	}
	filled := width * done / p.Total
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	left := "?"
	if done > 0 {
		left = (p.Elapsed / time.Duration(done) * time.Duration(p.Total-done)).Round(time.Second).String()
	}
	what := fmt.Sprintf("%6d ops %4d faults %3d violations", p.Ops, p.Faults, p.Violations)
	if p.Checking && !p.Done {
		what += " checking"
	}
	if p.Skipped != "" {
		what = "skipped: " + p.Skipped
		if r := []rune(what); len(r) > 60 {
			what = string(r[:59]) + "…"
		}
	}
	line := fmt.Sprintf("[%*d/%d] %s %-*s %s  %s elapsed, ~%s left", len(fmt.Sprint(p.Total)), p.Index, p.Total, bar, nameWidth(), p.Scenario, what,
		p.Elapsed.Round(time.Second), left)
	if p.Done && p.Index == p.Total {
		fmt.Fprint(w, "\r\033[K") // the summary follows
		return
	}
	fmt.Fprintf(w, "\r\033[K%s", line)
}

// drawProgress is the Progress of one seed's run (one draw) of a soak:
// on a terminal the soak's line, with the scenario running and the
// seed's time against its forecast; in a log, a line every
// logProgressEvery while the run lasts longer than that (the soak's own
// line comes when it ends). Either way, once the run has taken twice its
// forecast and half a minute more, one line says so and why that may be:
// the forecast prices a call at the backend's CallWall, a guess for a
// store in another language, whose calls may be far slower (a drawn
// Python store's run of 2422 keys, forecast within 30 s, ran for
// minutes with nothing said).
type drawProgress struct {
	w          io.Writer
	terminal   bool
	i, n       int   // the seed's place in the soak
	seed       int64 // the seed (or drawn seed) run
	forecast   time.Duration
	slowReason string // why a run may outlast its forecast on this store

	mu   sync.Mutex
	said bool          // the overrun line was written
	last time.Duration // when the last line went to a log
}

// every is how often the harness should report to p (Options.ProgressEvery).
func (p *drawProgress) every() time.Duration {
	if p.terminal {
		return 200 * time.Millisecond
	}
	return logProgressEvery
}

// report takes one Progress of the seed's run.
func (p *drawProgress) report(r harness.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pastForecast(p.w, p.terminal, p.forecast, r.Elapsed, &p.said) {
		fmt.Fprintf(p.w, "idemcheck soak: [%d/%d] seed %d has run %s, past twice its forecast of %s and half a minute: %s\n",
			p.i, p.n, p.seed, r.Elapsed.Round(time.Second), p.forecast.Round(time.Second), p.slowReason)
	}
	switch {
	case p.terminal:
		fmt.Fprintf(p.w, "\r\033[K[%d/%d] seed %d: %s, scenario %d of %d, %s elapsed of about %s", p.i, p.n, p.seed, r.Scenario, r.Index, r.Total,
			r.Elapsed.Round(time.Second), p.forecast.Round(time.Second))
	case !r.Done && r.Elapsed >= p.last+logProgressEvery:
		p.last = r.Elapsed
		fmt.Fprintf(p.w, "idemcheck soak: [%d/%d] seed %d running: %s (scenario %d of %d), %d calls, %s elapsed of about %s\n", p.i, p.n, p.seed,
			r.Scenario, r.Index, r.Total, r.Ops, r.Elapsed.Round(time.Second), p.forecast.Round(time.Second))
	}
}

// logMutate makes a mutate run without a live line (piped, or --json)
// write where it is to w: its plan once its mutants are generated, then
// the correct store's runs and the mutants as they settle, a line at most
// every logProgressEvery (and the last mutant's), with what is left at
// the pace so far. It wraps the hooks already set (the journal's, the
// live line's). A piped run of some hundred seconds wrote nothing before
// its table.
func logMutate(mo *mutate.Options, w io.Writer) {
	start := time.Now()
	var mu sync.Mutex
	var last time.Time
	due := func(final bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if !final && !last.IsZero() && time.Since(last) < logProgressEvery {
			return false
		}
		last = time.Now()
		return true
	}
	planned, baseline, progress := mo.Planned, mo.BaselineDone, mo.Progress
	mo.Planned = func(plan *mutate.Report) {
		if planned != nil {
			planned(plan)
		}
		fmt.Fprintf(w, "idemcheck mutate: %d mutants, each tried on up to %d scenarios (%s); the correct store runs them first\n",
			len(plan.Results), len(plan.Scenarios), strings.Join(plan.Scenarios, ", "))
	}
	var baselines int
	mutantsStart := start // the mutants start once the correct store's runs end
	mo.BaselineDone = func(b mutate.BaselineRun) {
		if baseline != nil {
			baseline(b)
		}
		mu.Lock()
		baselines++
		n := baselines
		mutantsStart = time.Now()
		mu.Unlock()
		if due(false) {
			fmt.Fprintf(w, "idemcheck mutate: the correct store: %d scenario(s) ended, the last %s, %s elapsed\n", n, b.Scenario, time.Since(start).Round(time.Second))
		}
	}
	counts := map[string]int{}
	mo.Progress = func(done, total int, r mutate.Result) {
		if progress != nil {
			progress(done, total, r)
		}
		mu.Lock()
		counts[r.Verdict]++
		killed, survived := counts[mutate.Killed]+counts[mutate.Refuted], counts[mutate.Survived]
		others := done - killed - survived
		pace := time.Since(mutantsStart)
		mu.Unlock()
		if !due(done == total) {
			return
		}
		line := fmt.Sprintf("idemcheck mutate: [%d/%d] mutants settled (%d killed, %d survived, %d neither so far), %s elapsed",
			done, total, killed, survived, others, time.Since(start).Round(time.Second))
		if done < total {
			left := time.Duration(float64(pace) / float64(done) * float64(total-done))
			line += fmt.Sprintf(", about %s left at this pace", left.Round(time.Second))
		}
		fmt.Fprintln(w, line)
	}
}
