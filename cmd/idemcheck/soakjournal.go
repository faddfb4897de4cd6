package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/internal/buildinfo"
)

// A soak of hundreds of runs must not be lost with its process: a second
// Ctrl-C, a crash or the machine's OOM killer would take the table that is
// printed at the end with it. So a soak keeps a line journal in its
// results directory (runjournal.go): its plan first, then a line as each
// seed's (or draw's) run starts and one as it ends, synced to disk before
// the next run starts. The soak's report is folded from those lines
// (soakTally), as it runs and by recheck from a dead soak's journal.

// soakKind is the type of a soak's first journal line.
const soakKind = "soak"

// soakHead is a soak's first journal line: what it runs.
type soakHead struct {
	lineHead
	Variant string `json:"variant"`
	// Seeds are the seeds (draws) this soak runs, in order.
	Seeds    []int64  `json:"seeds"`
	Plan     []string `json:"plan"`
	Hogs     int      `json:"hogs"`
	Parallel int      `json:"parallel"`
}

// soakEntry is one journal line after the head: a seed's run began
// (type "began"), or ended ("seed") with its verdicts.
type soakEntry struct {
	Type string `json:"type"`
	Seed int64  `json:"seed"`
	// Draw is a drawn run's check command (--random-flags), and DrawNumber
	// its number in the soak's plan (the head's Seeds): the run's Seed is
	// the seed drawn for it.
	Draw       string           `json:"draw,omitempty"`
	DrawNumber int64            `json:"draw_number,omitempty"`
	Verdict    string           `json:"verdict,omitempty"`
	Scenarios  []soakEntryScene `json:"scenarios,omitempty"`
	// Interrupted: an interrupt cut the seed's run short.
	Interrupted bool `json:"interrupted,omitempty"`
	// Dir is the results directory kept for a run that did not pass.
	Dir   string  `json:"dir,omitempty"`
	Error string  `json:"error,omitempty"`
	At    string  `json:"at,omitempty"`
	Secs  float64 `json:"seconds,omitempty"`
	// WriteSecs is how long writing the run's files took, when they were
	// written (a run that did not pass, or any drawn run).
	WriteSecs float64 `json:"write_seconds,omitempty"`
}

// writing is a seed's progress line's note of the time its files took.
func writing(secs float64) string {
	if secs == 0 {
		return ""
	}
	return fmt.Sprintf(" (its files: %.1fs)", secs)
}

// soakEntryScene is one scenario run's verdict in a journal line.
type soakEntryScene struct {
	// Name is the scenario run's (results.ID: "race", "race.2"), Scenario
	// the scenario's.
	Name     string  `json:"name"`
	Scenario string  `json:"scenario"`
	Verdict  string  `json:"verdict"`
	Seconds  float64 `json:"seconds"`
	Why      string  `json:"why,omitempty"`
}

// entryOf makes a seed's journal entry from its run's summary.
func entryOf(seed int64, draw string, sum *results.Summary, took time.Duration) soakEntry {
	e := soakEntry{Type: "seed", Seed: seed, Draw: draw, Verdict: string(sum.Verdict), Interrupted: sum.Interrupted,
		At: time.Now().UTC().Format(time.RFC3339), Secs: took.Seconds()}
	for _, s := range sum.Scenarios {
		sc := soakEntryScene{Name: s.ID().String(), Scenario: s.Name, Verdict: string(s.Verdict), Seconds: s.Seconds}
		switch s.Verdict {
		case check.Unknown:
			sc.Why = s.WhyUndecided()
		case check.Fail:
			if len(s.Violations) > 0 {
				sc.Why = s.Violations[0].Detail
			}
		}
		e.Scenarios = append(e.Scenarios, sc)
	}
	return e
}

// soakTally folds seeds' entries into a soak's report: the one fold of a
// soak, as it runs and from a dead soak's journal.
type soakTally struct {
	rows  map[string]*soakRow
	order []string
	ended map[int64]bool
}

// add counts one seed's ended run into rep.
func (t *soakTally) add(rep *soakReport, e soakEntry) {
	if t.rows == nil {
		t.rows, t.ended = map[string]*soakRow{}, map[int64]bool{}
	}
	t.ended[e.planned()] = true
	if e.Verdict == "error" {
		rep.Errors = append(rep.Errors, fmt.Sprintf("seed %d: %s", e.Seed, e.Error))
		return
	}
	rep.Ran++
	rep.Interrupted = rep.Interrupted || e.Interrupted
	for _, s := range e.Scenarios {
		name := s.Scenario
		if name == "" {
			name = s.Name
		}
		r, ok := t.rows[name]
		if !ok {
			r = &soakRow{Scenario: name}
			t.rows[name] = r
			t.order = append(t.order, name)
		}
		r.Seconds += s.Seconds
		switch check.Verdict(s.Verdict) {
		case check.Pass:
			r.Pass++
		case check.Fail:
			r.Fail++
		case check.Skipped:
			r.Skipped++
		default:
			r.Unknown++
		}
	}
	if e.Dir != "" {
		rep.Bad = append(rep.Bad, e.Dir)
	}
	if e.Draw != "" && !judgedWell(check.Verdict(e.Verdict)) && !e.Interrupted {
		rep.BadDraws = append(rep.BadDraws, e.Draw)
	}
}

// finish puts the rows in rep in the order the scenarios first ended and
// lists the planned seeds that did not end, the one in began as cut
// short (began: -1 for none).
func (t *soakTally) finish(rep *soakReport, planned []int64, began int64, cut bool) {
	rep.Rows = nil
	for _, n := range t.order {
		rep.Rows = append(rep.Rows, *t.rows[n])
	}
	if !cut {
		return
	}
	for _, s := range planned {
		if !t.ended[s] {
			rep.Unfinished = append(rep.Unfinished, soakUnfinished{Seed: s, Started: s == began})
		}
	}
}

// planned is the entry's seed or draw in the soak's plan: the draw's
// number for a drawn run, else its seed.
func (e soakEntry) planned() int64 {
	if e.DrawNumber != 0 {
		return e.DrawNumber
	}
	return e.Seed
}

// soakUnfinished is a seed (draw) a soak cut short did not finish:
// Started says it was cut short, else it never ran.
type soakUnfinished struct {
	Seed    int64 `json:"seed"`
	Started bool  `json:"started"`
}

// nothingJudged says whether no scenario run of the soak passed, failed
// or was undecided: every one was skipped, or none ran.
func nothingJudged(rep soakReport) bool {
	for _, r := range rep.Rows {
		if r.Pass+r.Fail+r.Unknown > 0 {
			return false
		}
	}
	return true
}

// soakCode is the exit code of a soak's report and why it applies: 1
// when a run that ended failed, 3 when a planned seed did not end, 2
// when a seed's run could not be made, 3 when a run was undecided or
// cut short or when no scenario run passed (every one was skipped:
// nothing was judged), else 0.
func soakCode(rep soakReport) (int, string) {
	fails, unknowns := 0, 0
	for _, r := range rep.Rows {
		fails += r.Fail
		unknowns += r.Unknown
	}
	switch {
	case fails > 0:
		return exitFail, fmt.Sprintf("exit 1: %d scenario run(s) failed in the seeds that ended", fails)
	case len(rep.Unfinished) > 0:
		return exitUnknown, fmt.Sprintf("exit 3: undecided: %d seed(s) did not end, and no run that ended failed", len(rep.Unfinished))
	case len(rep.Errors) > 0:
		return exitUsage, fmt.Sprintf("exit 2: %d seed(s) could not run (setup errors)", len(rep.Errors))
	case unknowns > 0 || rep.Interrupted:
		return exitUnknown, "exit 3: undecided: a run was undecided or cut short"
	case nothingJudged(rep):
		return exitUnknown, "exit 3: nothing was judged: every scenario run was skipped"
	}
	return exitPass, "exit 0: every run passed"
}

// judgedWell says whether a seed's run verdict is no cause to keep its
// files or print its reproduce line: a pass, or a run whose every scenario
// was skipped (nothing wrong; the soak as a whole says if nothing was
// judged at all).
func judgedWell(v check.Verdict) bool { return v == check.Pass || v == check.Skipped }

// codeVerdict is the verdict of an exit code (a soak's or a mutate
// run's summary.json, their --json).
func codeVerdict(code int) check.Verdict {
	switch code {
	case exitPass:
		return check.Pass
	case exitFail:
		return check.Fail
	}
	return check.Unknown
}

// crashedSoak says how a recovered soak ended.
const crashedSoak = "its process ended before the soak finished (killed, stopped at once by a second interrupt, out of memory, or the machine stopped); the seeds that ended stand, the rest are named below"

// recoverSoak reports a soak whose process died, from its journal: the
// table of the seeds that ended, those that did not, and the exit code
// what ended allows; it writes the report as the soak's summary.json.
func recoverSoak(dir string, asJSON bool, stdout, stderr io.Writer) (int, error) {
	how := howEnded(dir, crashedSoak) // read before the summary below replaces its last word
	path := filepath.Join(dir, harness.JournalFile)
	var head soakHead
	lines, torn, ok, err := readJournal(path, soakKind, &head)
	if err != nil {
		return exitUsage, err
	}
	if !ok {
		return recoverTorn(dir, asJSON, stdout) // killed while it wrote its plan
	}
	rep := soakReport{Store: head.Store, Variant: head.Variant, Seeds: len(head.Seeds), Hogs: head.Hogs, Parallel: head.Parallel,
		Commit: head.Commit, Bad: []string{}, Journal: path, Plan: head.Plan, Interrupted: true}
	if len(head.Seeds) > 0 {
		rep.Seed = head.Seeds[0]
	}
	var t soakTally
	began := int64(-1)
	for _, l := range lines[1:] {
		var e soakEntry
		if json.Unmarshal(l.Raw, &e) != nil {
			torn++
			continue
		}
		switch e.Type {
		case "began":
			began = e.planned()
		case "seed":
			t.add(&rep, e)
			if e.Draw != "" {
				rep.Draws = append(rep.Draws, e.Draw)
			}
		}
	}
	t.finish(&rep, head.Seeds, began, true)
	if st, err := os.Stat(path); err == nil {
		rep.Seconds = st.ModTime().Sub(head.Started).Seconds()
	}
	code, why := soakCode(rep)
	rep.Verdict, rep.Recovered, rep.Shard = codeVerdict(code), true, recoveredShard(head.Argv)
	if err := writeSummaryJSON(dir, rep); err != nil {
		fmt.Fprintf(stderr, "idemcheck: writing %s: %v (the verdict stands)\n", dir, err)
	}
	if asJSON {
		return code, printJSON(stdout, rep)
	}
	fmt.Fprintf(stdout, "recovered the soak %s from its journal: %s\n", dir, how)
	if torn > 0 {
		fmt.Fprintf(stdout, "(%d journal line(s) cut or unreadable, left out: a seed whose line is lost reads as not ended)\n", torn)
	}
	fmt.Fprintln(stdout)
	printSoak(stdout, rep)
	fmt.Fprintf(stdout, "%s\n", why)
	return code, nil
}

// recheckSoakSummary prints a finished soak's saved table: its runs'
// histories are in the directories of those that did not pass, which
// recheck takes one by one.
func recheckSoakSummary(dir string, asJSON bool, stdout io.Writer) (int, error) {
	var rep soakReport
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		return exitUsage, fmt.Errorf("recheck: %s/summary.json: not a soak's summary (%v)", dir, err)
	}
	code, why := soakCode(rep)
	if asJSON {
		return code, printJSON(stdout, rep)
	}
	fmt.Fprintf(stdout, "the soak %s, as it was saved (each run that did not pass has its own directory to recheck), with %s\n\n", dir, buildinfo.Get())
	printSoak(stdout, rep)
	fmt.Fprintf(stdout, "%s\n", why)
	return code, nil
}
