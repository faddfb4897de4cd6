// Package httpreport writes what a black-box run (idemcheck http) found:
// a text report with each checker's verdict, whether it applied, and for
// each violation the timeline of its key (every request and answer, on
// which instance, every charge the provider counted and by which
// instance, and the faults around them), plus the history as JSON lines
// and a summary as JSON. It reads the history, the ledger and the
// verdicts; it produces nothing they depend on.
package httpreport

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpcheck"
	"github.com/idemcheck/idemcheck/internal/wholefile"
)

// Run describes a black-box run for the report's header.
type Run struct {
	Targets  []string `json:"targets"`
	Seed     int64    `json:"seed"`
	Duration string   `json:"duration"`
	Clients  int      `json:"clients"`
	Command  string   `json:"command,omitempty"`
	// Declared lists, one line each, the request and policy the run
	// assumed (what each declaration widens included).
	Declared []string `json:"declared,omitempty"`
	// Policy is what the checkers were given (recheck judges with it).
	Policy httpcheck.Policy `json:"policy"`
	// Crashes are the instances that exited by themselves.
	Crashes []history.Crash `json:"crashes,omitempty"`
	// Problems are faults that could not be injected or healed.
	Problems []string `json:"problems,omitempty"`
	// Down are the instances killed that did not come back, one line
	// each: the rest of the run went without them.
	Down []string `json:"down,omitempty"`
	// Interrupted says when an interrupt cut the run short ("during the
	// load", "during the final probes"; "" when it ran to its end):
	// recheck judges such a run as it was judged ([httpcheck.Interrupted]).
	Interrupted string `json:"interrupted,omitempty"`
}

// Summary is summary.json.
type Summary struct {
	Run  Run  `json:"run"`
	Pass bool `json:"pass"`
	// Undecided: no violation, but a checker left something unjudged
	// (Pass is then false).
	Undecided bool               `json:"undecided,omitempty"`
	Requests  int                `json:"requests"`
	Charges   int                `json:"charges"`
	Faults    map[string]int     `json:"faults"`
	Results   []httpcheck.Result `json:"results"`
}

// maxNotes bounds the notes printed per checker.
const maxNotes = 3

// Write writes the text report to w: the run and its declarations, the
// verdicts (a run that tested nothing says so first) with their counts
// per cause, the crashes, and one timeline per checker and cause.
func Write(w io.Writer, run Run, h *history.History, l *history.Ledger, results []httpcheck.Result) error {
	xs := h.Exchanges()
	charges := l.Charges()
	var b strings.Builder
	if run.Interrupted != "" {
		fmt.Fprintf(&b, "INTERRUPTED %s: what was recorded until then is judged below; what the interrupt cut short is not\n\n", run.Interrupted)
	}
	if nothing := httpcheck.NothingTested(results, run.Interrupted != ""); nothing != "" {
		fmt.Fprintf(&b, "NOTHING TESTED: %s\n\n", nothing)
	}
	fmt.Fprintf(&b, "idemcheck http: %d instance(s) %s, %d clients, %s, seed %d\n", len(run.Targets), strings.Join(run.Targets, " "), run.Clients, run.Duration, run.Seed)
	if run.Command != "" {
		fmt.Fprintf(&b, "  command: %s\n", run.Command)
	}
	for _, d := range run.Declared {
		fmt.Fprintf(&b, "  declared %s\n", d)
	}
	fmt.Fprintf(&b, "  %d requests (%s), %d answered (%s); %d charges (%s); faults: %s\n",
		len(xs), countBy(xs, func(x history.Exchange) string { return x.Purpose }), answered(xs),
		countBy(xs, func(x history.Exchange) string {
			if !x.Answered() {
				return "no answer"
			}
			return fmt.Sprint(x.Status)
		}), len(charges), chargeCounts(charges), faultCounts(h.Faults(), run.Command == ""))
	for _, c := range run.Crashes {
		restarted := "not restarted: " + c.Err
		if c.Restarted > 0 {
			restarted = "restarted, answering again at " + ms(c.Restarted)
		}
		fmt.Fprintf(&b, "  CRASH: instance %s exited by itself at %s (%s); %s\n", c.Instance, ms(c.At), c.Status, restarted)
		for _, line := range lastLines(c.LogTail, 12) {
			fmt.Fprintf(&b, "         | %s\n", line)
		}
	}
	for _, p := range run.Problems {
		fmt.Fprintf(&b, "  fault not injected: %s\n", p)
	}
	for _, d := range run.Down {
		fmt.Fprintf(&b, "  DOWN: %s; the rest of the run, and its final probes, went without it\n", d)
	}
	for _, r := range results {
		verdict := Word(r)
		applied := "applied"
		if !r.Applied {
			applied = "did not apply"
		}
		fmt.Fprintf(&b, "%-4s %-16s (%s) %s\n", verdict, r.Checker, applied, r.Detail)
		if c := r.CauseCounts(); len(r.Causes()) > 0 {
			fmt.Fprintf(&b, "     causes: %s\n", joinCounts(c))
		}
		if r.Unjudged != "" {
			fmt.Fprintf(&b, "     not judged: %s\n", r.Unjudged)
		}
		for i, n := range r.Notes {
			if i == maxNotes {
				fmt.Fprintf(&b, "     note: … and %d more (every note is in summary.json, under the checker's \"notes\")\n", len(r.Notes)-i)
				break
			}
			fmt.Fprintf(&b, "     note: %s\n", n)
		}
	}
	for _, r := range results {
		shown := map[string]bool{}
		for _, v := range r.Violations {
			if shown[v.Cause] || r.Checker == httpcheck.Answers {
				continue
			}
			shown[v.Cause] = true
			cause := ""
			if v.Cause != "" {
				cause = " [" + v.Cause + "]"
			}
			fmt.Fprintf(&b, "\n%s violation%s (the first of %d): %s\n", r.Checker, cause, r.CauseCounts()[v.Cause], v.Detail)
			for _, line := range Timeline(xs, charges, h.Faults(), v.Key) {
				fmt.Fprintf(&b, "  %s\n", line)
			}
		}
		if len(r.Violations) > len(shown) && r.Checker != httpcheck.Answers {
			fmt.Fprintf(&b, "\n(%d more %s violations in summary.json)\n", len(r.Violations)-len(shown), r.Checker)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	return lines[max(0, len(lines)-n):]
}

// chargeCounts counts the effective charges by outcome, and the charge
// requests that made no effect (their downstream key had made one).
func chargeCounts(cs []history.Charge) string {
	m := map[string]int{}
	for _, c := range cs {
		o := c.Outcome
		switch {
		case !c.Effective:
			o = "no effect: a repeated downstream key"
		case o == "":
			o = "unanswered"
		}
		m[o]++
	}
	if len(m) == 0 {
		return "none"
	}
	return joinCounts(m)
}

// Timeline lists, in time order, everything that happened to a key: its
// requests and answers (on which instance), the charges of its orders
// (by which instance), and the faults that overlap them.
func Timeline(xs []history.Exchange, charges []history.Charge, fs []history.Fault, key string) []string {
	type ev struct {
		at   int64
		line string
	}
	var evs []ev
	orders := map[string]bool{}
	var from, to int64 = history.Never, 0
	for _, x := range xs {
		if x.Key != key || !x.HasKey {
			continue
		}
		orders[x.Order] = true
		from, to = min(from, x.Call), max(to, x.Call)
		evs = append(evs, ev{x.Call, fmt.Sprintf("%9s  client %-3d → %-4s POST %-10s attempt %d, order %s", ms(x.Call), x.Client, x.Instance, x.Purpose, x.Attempt, x.Order)})
		if x.Answered() {
			to = max(to, x.Return)
			evs = append(evs, ev{x.Return, fmt.Sprintf("%9s  client %-3d ← %-4s %d %s", ms(x.Return), x.Client, x.Instance, x.Status, clip(x.Reply))})
		} else {
			at := max(x.ErrAt, x.Call)
			evs = append(evs, ev{at, fmt.Sprintf("%9s  client %-3d ✗ %-4s no answer: %s", ms(at), x.Client, x.Instance, x.Err)})
		}
	}
	for _, c := range charges {
		if orders[c.Order] && c.Effective {
			via := c.Via
			if via == "" {
				via = "?"
			}
			from, to = min(from, c.At), max(to, c.At)
			evs = append(evs, ev{c.At, fmt.Sprintf("%9s  provider     ★ %-4s charged order %s: %s", ms(c.At), via, c.Order, c.ID)})
			if c.End > 0 && c.Outcome != history.OutcomeCharged {
				evs = append(evs, ev{c.End, fmt.Sprintf("%9s  provider     ☆ %-4s %s: %s", ms(c.End), via, c.ID, c.Outcome)})
			}
		}
	}
	for _, f := range fs {
		if f.Start <= to && f.End >= from {
			evs = append(evs, ev{f.Start, fmt.Sprintf("%9s  fault        ⚡ %-4s %s until %s", ms(f.Start), f.Failpoint, f.Kind, ms(f.End))})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.line
	}
	return out
}

// JournalNote is the kind of a black-box run's first journal line: its
// [Run] as it started (no crashes, problems or interrupt yet), which a
// run recovered from its journal is reported and judged by.
const JournalNote = "http_run"

// WriteDir writes report.txt, report.html, history.jsonl and
// summary.json into dir.
func WriteDir(dir string, run Run, h *history.History, l *history.Ledger, results []httpcheck.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// summary.json last: a directory that has one has its other files
	// whole (each is written whole or not at all, wholefile).
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{"report.txt", func(w io.Writer) error { return Write(w, run, h, l, results) }},
		{HTMLFile, func(w io.Writer) error { return WriteHTML(w, run, h, l, results) }},
		{"history.jsonl", func(w io.Writer) error { return history.Write(w, "http", h, l) }},
		{"summary.json", func(w io.Writer) error {
			s := Summary{Run: run, Pass: Overall(results) == "PASS", Undecided: Undecided(results), Requests: len(h.Exchanges()), Charges: len(l.Charges()),
				Faults: map[string]int{}, Results: results}
			for _, f := range h.Faults() {
				s.Faults[string(f.Kind)]++
			}
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(s)
		}},
	}
	for i, f := range files {
		if err := wholefile.Write(filepath.Join(dir, f.name), f.write); err != nil {
			// The files after it are not written either (summary.json
			// last, and only beside whole files): said, where only the
			// first was named.
			var rest []string
			for _, g := range files[i+1:] {
				rest = append(rest, g.name)
			}
			if len(rest) > 0 {
				return fmt.Errorf("%s: %w (not written either: %s)", f.name, err, strings.Join(rest, ", "))
			}
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// Pass reports whether every checker passed.
func Pass(results []httpcheck.Result) bool {
	for _, r := range results {
		if !r.Pass {
			return false
		}
	}
	return true
}

// Undecided reports whether no checker found a violation but some left
// what it saw unjudged ([httpcheck.Result.Unjudged]): the run is neither
// a pass nor a failure.
func Undecided(results []httpcheck.Result) bool {
	if !Pass(results) {
		return false
	}
	for _, r := range results {
		if r.Unjudged != "" {
			return true
		}
	}
	return false
}

// Word is one checker's verdict: FAIL (a violation), UNDECIDED (none,
// but something left unjudged) or PASS.
func Word(r httpcheck.Result) string {
	switch {
	case !r.Pass:
		return "FAIL"
	case r.Unjudged != "":
		return "UNDECIDED"
	}
	return "PASS"
}

// Overall is the run's verdict: FAIL, UNDECIDED or PASS (see [Word]).
func Overall(results []httpcheck.Result) string {
	switch {
	case !Pass(results):
		return "FAIL"
	case Undecided(results):
		return "UNDECIDED"
	}
	return "PASS"
}

// Closing is the run's verdict in one line, the last a run prints: the
// checkers that failed, that a run was undecided, or that every checker
// passed, naming those that had nothing to judge (a pass says what was
// not judged) and those whose pass carries notes (a service whose
// instances ran one key's work at once, held to at-most-once by the
// provider's key alone, ended on a bare PASS, its note above it).
func Closing(results []httpcheck.Result) string {
	var failed, idle, noted []string
	for _, r := range results {
		switch {
		case !r.Pass:
			failed = append(failed, fmt.Sprintf("%s (%d violations)", r.Checker, len(r.Violations)))
		case !r.Applied:
			idle = append(idle, r.Checker)
		case len(r.Notes) > 0:
			noted = append(noted, r.Checker)
		}
	}
	notes := ""
	if len(noted) > 0 {
		notes = fmt.Sprintf(" (read the notes of %s above)", strings.Join(noted, ", "))
	}
	switch Overall(results) {
	case "FAIL":
		return "FAIL: " + strings.Join(failed, ", ")
	case "UNDECIDED":
		return "UNDECIDED: no violation, but not everything was judged (the \"not judged\" lines above)"
	}
	if len(idle) > 0 {
		return fmt.Sprintf("PASS: every checker passed; %s had nothing to judge in this run (the lines above say why)%s", strings.Join(idle, ", "), notes)
	}
	return "PASS: every checker passed, each on what it judged" + notes
}

func ms(t int64) string { return history.Millis(t) }

func clip(s string) string {
	if len(s) > 90 {
		return s[:87] + "..."
	}
	return s
}

func answered(xs []history.Exchange) int {
	n := 0
	for _, x := range xs {
		if x.Answered() {
			n++
		}
	}
	return n
}

func countBy(xs []history.Exchange, f func(history.Exchange) string) string {
	m := map[string]int{}
	for _, x := range xs {
		m[f(x)]++
	}
	return joinCounts(m)
}

// faultCounts counts the run's faults by kind, and says what no instance
// fault leaves out: a takeover after an owner's death went untested.
// targets says the instances were someone else's (--target), which
// idemcheck never kills or pauses.
func faultCounts(fs []history.Fault, targets bool) string {
	m := map[string]int{}
	for _, f := range fs {
		m[string(f.Kind)]++
	}
	if len(m) == 0 {
		return "none (no instance was killed or paused and no network fault injected: only the clients' own requests were tested, not faults)"
	}
	out := joinCounts(m)
	if m[string(history.FaultInstanceKill)]+m[string(history.FaultInstancePause)]+m[string(history.FaultInstanceExit)] == 0 {
		if targets {
			return out + " (no instance was killed or paused: --target instances are someone else's, so no key was taken over after its owner died; --cmd lets idemcheck start, kill and restart them)"
		}
		return out + " (no instance was killed or paused, so no key was taken over after its owner died)"
	}
	return out
}

func joinCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
