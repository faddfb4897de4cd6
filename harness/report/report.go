// Package report writes a run's results directory: summary.json, the
// history as JSON lines (history.jsonl, which history.Load reads back),
// report.md with the scenarios × checkers table, the fault schedules and
// the traces of violated keys, porcupine's visualisations, and a trace
// file per failing scenario. The HTML report is its subpackage
// htmlreport. It reads results; it never runs anything.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/internal/pool"
	"github.com/idemcheck/idemcheck/internal/wholefile"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// RunDir is a results directory made before a run, so an unwritable
// destination is found before any work is done.
type RunDir struct {
	Root string // e.g. results/
	Path string // results/<time>-<store>-<variant>
	// Older: the run is not the latest (one recovered afterwards), so
	// Write leaves <root>/latest where it is.
	Older bool
}

// PrepareRunDir makes results/<time>-<store>-<variant>/ under root, with
// the room for its last word (EndFile), and checks that it can be
// written. On error nothing is left behind.
func PrepareRunDir(root, store, variant string, now time.Time) (*RunDir, error) {
	dir, err := MkdirAt(root, now, func(stamp string) string { return stamp + "-" + store + "-" + variant })
	if err != nil {
		return nil, fmt.Errorf("cannot write results to %s: %v", root, unwrapPathErr(err))
	}
	if err := os.WriteFile(filepath.Join(dir, Marker), nil, 0o644); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("cannot write results to %s: %v", root, unwrapPathErr(err))
	}
	if err := reserveEnd(dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("cannot write results to %s: %v", root, unwrapPathErr(err))
	}
	return &RunDir{Root: root, Path: dir}, nil
}

// MkdirAt makes root and, under it, the directory name(stamp) of a run
// started at now, stamp its time to the millisecond
// ("20060102-150405.000"), and returns its path. A run started in the
// same millisecond beside another of the same name (CI shards, make -j)
// takes the next millisecond's: the names stay in their format, in
// order, and unique. The second was refused ("file exists"), or, where
// the directory was made with MkdirAll, shared the first's.
func MkdirAt(root string, now time.Time, name func(stamp string) string) (string, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	for try := 0; ; try++ {
		dir := filepath.Join(root, name(now.Add(time.Duration(try)*time.Millisecond).Format("20060102-150405.000")))
		err := os.Mkdir(dir, 0o755)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == maxNameTries {
			return dir, err
		}
	}
}

// maxNameTries bounds the next names MkdirAt tries when a run's is
// taken: a second of runs started at once.
const maxNameTries = 999

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Write writes the run's files, summary.json last, and points
// <root>/latest at the directory.
func (d *RunDir) Write(sum *results.Summary) error {
	sum.Dir = d.Path
	// The history and each scenario's porcupine visualisation and traces
	// depend on nothing but what they show: written a few at once
	// (results.Summary.WriteWidth).
	err := pool.Each(len(sum.Scenarios)+1, sum.WriteWidth(), func(i int) error {
		if i == 0 {
			return writeFile(filepath.Join(d.Path, "history.jsonl"), func(w io.Writer) error { return writeHistory(w, sum) })
		}
		s := &sum.Scenarios[i-1]
		if l := s.Linearization(); l != nil {
			if err := writeFile(filepath.Join(d.Path, "linearizability-"+s.ID().String()+".html"), func(w io.Writer) error { return WriteLinearization(w, l) }); err != nil {
				return err
			}
		}
		if len(s.Violations) > 0 && s.History() != nil {
			return writeFile(filepath.Join(d.Path, "trace-"+s.ID().String()+".txt"), func(w io.Writer) error { return WriteTraces(w, s, 5) })
		}
		return nil
	})
	// report.md, the verdict for a person, is written even when the
	// history or a page was not (a disk that fills): it is small.
	if rerr := writeFile(filepath.Join(d.Path, "report.md"), func(w io.Writer) error { return writeReport(w, sum) }); err != nil || rerr != nil {
		return errors.Join(err, rerr)
	}
	// summary.json last: a directory that has one has its history whole.
	// A process that dies while it writes them leaves no summary, and its
	// journal (harness.JournalFile) says what the run recorded.
	if err := writeJSON(filepath.Join(d.Path, "summary.json"), sum); err != nil {
		return err
	}
	DropEnded(d.Path)
	if d.Older {
		return nil
	}
	// The link is made under a name of this run's own and renamed over
	// latest: runs that end at once in one root (test packages run side
	// by side, each through idemtest) must not share the temporary name.
	latest := filepath.Join(d.Root, "latest")
	tmp := filepath.Join(d.Root, "."+filepath.Base(d.Path)+".latest")
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(d.Path), tmp); err != nil {
		return err
	}
	return os.Rename(tmp, latest)
}

func writeJSON(path string, v any) error {
	return writeFile(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}

// writeFile writes the file at path whole or not at all (wholefile): a
// summary.json cut short by a full disk would read as a run's record.
func writeFile(path string, f func(io.Writer) error) error { return wholefile.Write(path, f) }

func writeHistory(w io.Writer, sum *results.Summary) error {
	for _, s := range sum.Scenarios {
		if s.History() == nil {
			continue
		}
		if err := history.Write(w, s.ID().String(), s.History(), s.Ledger()); err != nil {
			return err
		}
	}
	return nil
}

// nothingJudged is the table's cell for a checker that passed having
// judged nothing ([check.Result.Vacuous]).
const nothingJudged = "—"

func writeReport(w io.Writer, sum *results.Summary) error {
	fmt.Fprintf(w, "# idemcheck: %s on %s/%s\n\n", strings.ToUpper(string(sum.Verdict)), sum.Store, sum.Variant)
	fmt.Fprintf(w, "Seed %d, %d clients, %d keys, LockTTL %s, %.1fs, started %s.\n\n", sum.Seed, sum.Clients, sum.Keys, sum.LockTTL, sum.Seconds, sum.Started.Format(time.RFC3339))
	if line := sum.CutShort(); line != "" {
		fmt.Fprintf(w, "**%s**\n\n", line)
	}
	fmt.Fprintf(w, "| scenario | verdict | ops | max concurrent Begins on a key | faults |")
	for _, c := range check.Docs {
		fmt.Fprintf(w, " %s |", c.Name)
	}
	fmt.Fprintf(w, "\n|---|---|---|---|---|%s\n", strings.Repeat("---|", len(check.Docs)))
	vacuous := false
	for _, s := range sum.Scenarios {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s |", s.ID(), s.Verdict, s.Ops, s.MaxConcurrentBegins, faultString(s.Faults))
		for _, c := range s.Checkers {
			cell := string(c.Verdict)
			if c.Vacuous() { // a pass that judged nothing says nothing: not "pass"
				cell, vacuous = nothingJudged, true
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
	if vacuous {
		fmt.Fprintf(w, "\n%s: the checker passed with nothing to judge in that scenario (its line under Checkers says why).\n", nothingJudged)
	}
	for _, s := range sum.Scenarios {
		if len(s.Schedule) > 0 {
			fmt.Fprintf(w, "\n## Fault schedule of %s (seed %d)\n\n", s.ID(), sum.Seed)
			for _, line := range s.Schedule {
				fmt.Fprintf(w, "- %s\n", line)
			}
		}
	}
	for _, s := range sum.Scenarios {
		if s.History() != nil {
			retention := s.Retention.D()
			if retention == 0 && s.Check != nil {
				retention = s.Check.Retention
			}
			writeReplication(w, s.ID().String(), s.History(), retention)
		}
	}
	fmt.Fprintf(w, "\n## Checkers\n\n")
	for _, s := range sum.Scenarios {
		fmt.Fprintf(w, "### %s\n\n", s.ID())
		// Why a scenario was skipped or undecided, and what a pass did
		// not judge: said here, not only in summary.json.
		if s.Skipped != "" {
			fmt.Fprintf(w, "Skipped: %s\n\n", s.Skipped)
		}
		if s.Error != "" {
			label := "Note"
			if s.Verdict == check.Unknown {
				label = "Undecided"
			}
			fmt.Fprintf(w, "%s: %s\n\n", label, s.Error)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "Note: %s\n\n", n)
		}
		for _, c := range s.Checkers {
			fmt.Fprintf(w, "- **%s** %s: %s\n", c.Checker, c.Verdict, c.Detail)
		}
		fmt.Fprintln(w)
	}
	if len(sum.Violations) == 0 {
		fmt.Fprintf(w, "No violations.\n")
		return nil
	}
	fmt.Fprintf(w, "## Violations\n\n")
	if m, _ := stores.LookupMutant(sum.Variant); m.Side == stores.ConfigSide {
		fmt.Fprintf(w, "%s is a configuration, not a bug in the store's code: %s\n\n", sum.Variant, m.Bug)
	}
	for _, v := range sum.Violations {
		fmt.Fprintf(w, "- `%s` on `%s`: %s\n", v.Checker, v.Key, v.Detail)
	}
	for _, s := range sum.Scenarios {
		if len(s.Violations) == 0 || s.History() == nil {
			continue
		}
		fmt.Fprintf(w, "\n## Trace of %s\n\n```\n", s.ID())
		if err := WriteTraces(w, &s, 1); err != nil {
			return err
		}
		fmt.Fprintf(w, "```\n")
	}
	return nil
}

func faultString(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// WriteTraces prints, for up to max violated keys of the scenario, every
// event on the key in time order: calls and answers, work, faults, charges.
func WriteTraces(w io.Writer, s *results.ScenarioResult, max int) error {
	seen := map[string]bool{}
	n := 0
	for _, v := range s.Violations {
		if seen[v.Key] || n >= max {
			continue
		}
		seen[v.Key] = true
		n++
		var checkers []string
		for _, v2 := range s.Violations {
			if v2.Key == v.Key {
				checkers = append(checkers, v2.Checker)
			}
		}
		fmt.Fprintf(w, "key %s, violated: %s\n", v.Key, strings.Join(dedupe(checkers), ", "))
		fmt.Fprintf(w, "  %s\n", v.Detail)
		for _, line := range TraceLines(s.History(), s.Ledger(), v.Key) {
			fmt.Fprintf(w, "  %s\n", line)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func dedupe(list []string) []string {
	var out []string
	for _, s := range list {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

type traceLine struct {
	at   int64
	text string
}

// TraceLines lists every event on a key (tenant/key) in time order, one
// line each: the calls and their answers, the work runs, the faults, the
// provider's charges of the key's order, and the clients' final answers.
// Prunes, which touch every key, are listed too.
//
// Of a spilled history (history.History.SpillTo) it reads the part that
// holds the key, never the whole.
func TraceLines(h *history.History, l *history.Ledger, key string) []string {
	h = partWith(h, key)
	var ls []traceLine
	order := ""
	for _, op := range h.Ops() {
		if op.Input.Kind == models.Prune {
			ls = append(ls, traceLine{op.Call, fmt.Sprintf("%9s  client %-3d %s", history.Millis(op.Call), op.Client, models.DescribeOperation(op.Input, op.Output))})
			continue
		}
		if op.Input.Key.String() != key {
			continue
		}
		ret := history.Millis(op.Return)
		line := fmt.Sprintf("%9s  client %-3d %s   (returned %s)", history.Millis(op.Call), op.Client, models.DescribeOperation(op.Input, op.Output), ret)
		if op.Err != "" {
			// The store's own words: why it fenced, or why no answer came.
			line += "   store said: " + op.Err
		}
		ls = append(ls, traceLine{op.Call, line})
	}
	for _, wr := range h.Work() {
		if wr.Key.String() != key {
			continue
		}
		order = wr.Order
		end := "did not finish"
		switch {
		case wr.End != history.Never && wr.Failed:
			end = "failed at " + history.Millis(wr.End)
		case wr.End != history.Never:
			end = "done at " + history.Millis(wr.End)
		}
		charge := ""
		if wr.ChargeID != "" {
			charge = ", charge " + wr.ChargeID
		}
		ls = append(ls, traceLine{wr.Start, fmt.Sprintf("%9s  client %-3d work for order %s (token %s) %s%s", history.Millis(wr.Start), wr.Client, wr.Order, faults.ShortToken(string(wr.Token)), end, charge)})
	}
	for _, f := range h.Faults() {
		if slices.Contains(clusterKinds, f.Kind) { // they hit every key
			ls = append(ls, traceLine{f.Start, fmt.Sprintf("%9s  topology   %s (%s) until %s", history.Millis(f.Start), f.Kind, f.Failpoint, history.Millis(f.End))})
			continue
		}
		if f.Key.String() != key {
			continue
		}
		what := "CRASHED"
		switch f.Kind {
		case history.FaultPause:
			what = "paused until " + history.Millis(f.End)
		case history.FaultWorkerKill:
			what = "KILLED (its worker process, SIGKILL)"
		}
		if f.Failpoint != "" {
			what += " at " + f.Failpoint
		} // a kill at a random moment has none: it printed "CRASHED at "
		ls = append(ls, traceLine{f.Start, fmt.Sprintf("%9s  client %-3d %s", history.Millis(f.Start), f.Client, what)})
	}
	if order != "" && l != nil {
		for _, c := range l.Charges() {
			if c.Order == order {
				eff := "a new charge"
				if !c.Effective {
					eff = "deduplicated by key " + c.Key
				}
				ls = append(ls, traceLine{c.At, fmt.Sprintf("%9s  provider   charge %s for order %s by client %d: %s", history.Millis(c.At), c.ID, c.Order, c.Client, eff)})
			}
		}
	}
	for _, a := range h.Answers() {
		if a.Key.String() != key {
			continue
		}
		got := fmt.Sprintf("%d %q", a.Status, a.Response.Body)
		if a.Err != "" {
			got = a.Err
		}
		ls = append(ls, traceLine{a.At, fmt.Sprintf("%9s  client %-3d final answer after %d attempt(s): %s", history.Millis(a.At), a.Client, a.Attempts, got)})
	}
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].at < ls[j].at })
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.text
	}
	return out
}

// partWith is the part of h (history.History.EachPart) that holds key's
// calls: h itself unless it spilled; an empty history if no part does.
func partWith(h *history.History, key string) *history.History {
	if !h.Spilled() {
		return h
	}
	found := history.New()
	_ = h.EachPart(func(p *history.History) error {
		if p.Has(func(op history.Op) bool { return op.Input.Kind != models.Prune && op.Input.Key.String() == key }) {
			found = p
			return errFound
		}
		return nil
	})
	return found
}

// errFound ends a search of the parts (partWith).
var errFound = errors.New("found")
