// Package htmlreport writes a run's report as one self-contained HTML page
// (inline CSS and JS, nothing fetched from the network), report.html, beside
// the other files of a results directory: the summary table of scenarios ×
// checkers, a Jepsen-style timeline of every scenario (a lane per client, a
// box per store call and work run, fault windows shaded), and per key its
// owners and tokens, saved responses, ledger charges and violations, each
// with the checker's explanation. It is what a user opens to understand a
// failure without reading idemcheck's code.
package htmlreport

import (
	"bufio"
	_ "embed"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/internal/pool"
)

// FileName is the report's name inside a results directory.
const FileName = "report.html"

// Limits keep a report small enough to open: the rest of a run is in
// history.jsonl, and the report says how much it left out.
type Limits struct {
	TimelineOps int // store calls drawn per scenario (the first ones)
	// TimelineTotal shares a budget of calls among the scenarios with a
	// history, so a long run of many scenarios stays a few megabytes; each
	// still gets at least min(TimelineOps, 500). 0: no budget.
	TimelineTotal int
	ViolatedKeys  int // violated keys detailed per scenario
	OtherKeys     int // keys without violations detailed per scenario
	Violations    int // rows in the run-wide violation list
	// KeyRows: rows of each table of a shown key (its owners, saved
	// responses, charges, final answers); the rest are counted. 0: all.
	KeyRows int
}

// shownViolations is how many violation rows the page shows unfolded, so
// the timeline is not pushed far down.
const shownViolations = 6

// maxSchedule is how many lines of a scenario's fault schedule are shown.
const maxSchedule = 40

// DefaultLimits are the limits Write uses.
var DefaultLimits = Limits{TimelineOps: 2000, TimelineTotal: 12000, ViolatedKeys: 50, OtherKeys: 12, Violations: 100, KeyRows: 40}

// timelineCap is how many calls each scenario's timeline draws.
func (l Limits) timelineCap(sum *results.Summary) int {
	n := 0
	for i := range sum.Scenarios {
		if h := sum.Scenarios[i].History(); h != nil && sum.Scenarios[i].Ops > 0 {
			n++
		}
	}
	if l.TimelineTotal <= 0 || n == 0 {
		return l.TimelineOps
	}
	return min(l.TimelineOps, max(l.TimelineTotal/n, 500))
}

//go:embed report.html.tmpl
var pageSource string

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"upper": func(v check.Verdict) string { return strings.ToUpper(string(v)) },
	"join":  strings.Join,
	"mod2":  func(i int) int { return i % 2 },
	"add":   func(a, b int) int { return a + b },
	"ms":    ms,
	"more":  moreRows,
}).Parse(pageSource))

// leftOut is what a key's table says of the rows it left out.
type leftOut struct {
	Left, Shown, Total int
	What               string
}

// moreRows describes a table of a key that shows shown rows of what and
// leaves left out (Limits.KeyRows).
func moreRows(shown, left int, what string) leftOut {
	return leftOut{Left: left, Shown: shown, Total: shown + left, What: what}
}

// Write writes dir/report.html for the run. Files the report links to
// (history.jsonl, the porcupine visualisations, traces) are linked only
// when they are in dir, so call it after report.RunDir.Write.
func Write(dir string, sum *results.Summary) error {
	return WriteLimits(dir, sum, DefaultLimits)
}

// WriteLimits is Write with other limits.
func WriteLimits(dir string, sum *results.Summary, lim Limits) error {
	if sum == nil {
		return fmt.Errorf("html report: no summary to write")
	}
	p := buildPage(dir, sum, lim)
	if err := renderScenarios(p.Scenarios, sum.WriteWidth()); err != nil {
		return fmt.Errorf("html report: %v", err)
	}
	path := filepath.Join(dir, FileName)
	tmp, err := os.CreateTemp(dir, ".report-*.html")
	if err != nil {
		return fmt.Errorf("html report: %v", err)
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<16)
	if err := pageTemplate.Execute(bw, p); err != nil {
		tmp.Close()
		return fmt.Errorf("html report: %v", err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("html report: %v", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("html report: %v", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("html report: %v", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("html report: %v", err)
	}
	return nil
}

// page is what the template renders.
type page struct {
	Sum        *results.Summary
	Started    string
	Files      []link
	History    string // "history.jsonl" when it is in the directory
	Checkers   []checkerDoc
	Rows       []summaryRow
	Violations []violationRow // the first few, always shown
	MoreRows   []violationRow // the rest, folded
	MoreViols  int            // left out altogether (past Limits.Violations)
	Scenarios  []*scenarioView
	Limits     Limits
	Generated  string
}

type link struct{ Name, Href string }

type checkerDoc struct{ Name, Doc string }

type summaryRow struct {
	Name, Anchor string
	Verdict      check.Verdict
	Ops, Conc    int
	Faults       string
	Seconds      string
	Cells        []cell
}

type cell struct {
	Verdict check.Verdict
	Detail  string
	// Vacuous: a pass that judged nothing ([check.Result.Vacuous]),
	// shown as such, not as a pass.
	Vacuous bool
}

type violationRow struct {
	Scenario, ScenarioAnchor string
	Checker, Key, KeyAnchor  string
	Detail                   string
}

type scenarioView struct {
	Name, Anchor, Doc string
	Verdict           check.Verdict
	Error             string
	Ops, Rounds       int
	Clients, KeysN    int
	Conc              int
	Faults            string
	Outcomes          string
	Seconds           string
	Checkers          []check.Result
	Timeline          *timeline
	Keys              []*keyView
	TotalKeys         int
	// Part says that the keys and timeline drawn are one part of a run
	// too large to draw whole ("" when they are all of it).
	Part           string
	HiddenViolated int
	HiddenOther    int
	Wide           []check.Violation
	Lin, Trace     string
	Skipped        string
	Findings       string
	Schedule       []string
	MoreSchedule   int
	// HTML is the scenario's section, rendered by renderScenarios.
	HTML template.HTML
}

// renderScenarios renders each scenario's section (most of a report's
// page: its timeline and keys) into its HTML, a few at once: the
// sections depend on nothing but their scenario, and the page then
// only copies them in. A section is escaped as the page's "scenario"
// template would be where the page includes it, in HTML text.
func renderScenarios(views []*scenarioView, width int) error {
	section := pageTemplate.Lookup("scenario")
	return pool.Each(len(views), width, func(i int) error {
		var b strings.Builder
		if err := section.Execute(&b, views[i]); err != nil {
			return err
		}
		views[i].HTML = template.HTML(b.String())
		return nil
	})
}

func buildPage(dir string, sum *results.Summary, lim Limits) *page {
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	p := &page{Sum: sum, Started: sum.Started.Format(time.RFC3339), Limits: lim, Generated: time.Now().Format(time.RFC3339)}
	for _, f := range []string{"summary.json", "history.jsonl", "report.md"} {
		if exists(f) {
			p.Files = append(p.Files, link{f, f})
		}
	}
	if exists("history.jsonl") {
		p.History = "history.jsonl"
	}
	for _, c := range check.Docs {
		p.Checkers = append(p.Checkers, checkerDoc{c.Name, c.Doc})
	}
	tlCap := lim.timelineCap(sum)
	// Each scenario's view (its keys and timeline: most of the page's
	// work) depends on its scenario alone: built a few at once
	// (results.Summary.WriteWidth: a spilled history's drawn part is
	// loaded whole, history.History.Drawable).
	views := make([]*scenarioView, len(sum.Scenarios))
	_ = pool.Each(len(views), sum.WriteWidth(), func(i int) error {
		views[i] = viewOf(&sum.Scenarios[i], lim, tlCap, exists)
		return nil
	})
	for i := range sum.Scenarios {
		s, sv := &sum.Scenarios[i], views[i]
		if sv.Lin != "" {
			p.Files = append(p.Files, link{"porcupine: " + s.ID().String(), sv.Lin})
		}
		if sv.Trace != "" {
			p.Files = append(p.Files, link{"trace: " + s.ID().String(), sv.Trace})
		}
		p.Scenarios = append(p.Scenarios, sv)

		row := summaryRow{Name: s.ID().String(), Anchor: sv.Anchor, Verdict: s.Verdict, Ops: s.Ops, Conc: s.MaxConcurrentBegins,
			Faults: sv.Faults, Seconds: sv.Seconds}
		for _, c := range check.Docs {
			cl := cell{Verdict: "", Detail: "not run"}
			for _, r := range s.Checkers {
				if r.Checker == c.Name {
					cl = cell{Verdict: r.Verdict, Detail: r.Detail, Vacuous: r.Vacuous()}
					if cl.Vacuous {
						cl.Detail = "nothing to judge: " + r.Detail
					}
				}
			}
			row.Cells = append(row.Cells, cl)
		}
		p.Rows = append(p.Rows, row)

		// Run-wide violation rows link to the key's details when shown.
		anchor := map[check.Violation]string{}
		for _, v := range sv.Keys {
			for _, viol := range v.Violations {
				if _, ok := anchor[viol]; !ok {
					anchor[viol] = v.Anchor
				}
			}
		}
		for _, viol := range s.Violations {
			if len(p.Violations)+len(p.MoreRows) >= lim.Violations {
				p.MoreViols++
				continue
			}
			row := violationRow{Scenario: s.ID().String(), ScenarioAnchor: sv.Anchor,
				Checker: viol.Checker, Key: viol.Key, KeyAnchor: anchor[viol], Detail: viol.Detail}
			if len(p.Violations) < shownViolations {
				p.Violations = append(p.Violations, row)
			} else {
				p.MoreRows = append(p.MoreRows, row)
			}
		}
	}
	return p
}

// viewOf is scenario s's view on the page: what it says of the run, and
// the keys and timeline it draws within lim (tlCap calls). exists says
// whether a file is in the results directory.
func viewOf(s *results.ScenarioResult, lim Limits, tlCap int, exists func(string) bool) *scenarioView {
	sv := &scenarioView{Name: s.ID().String(), Anchor: "s-" + anchorSafe(s.ID().String()), Verdict: s.Verdict, Error: s.Error,
		Ops: s.Ops, Rounds: s.Rounds, Clients: s.Clients, KeysN: s.Keys, Conc: s.MaxConcurrentBegins,
		Faults: countString(s.Faults, "none"), Outcomes: countString(s.Outcomes, "none"),
		Seconds: fmt.Sprintf("%.1fs", s.Seconds), Checkers: s.Checkers,
		Skipped: s.Skipped, Schedule: s.Schedule}
	if len(s.Findings) > 0 {
		sv.Findings = countString(s.Findings, "")
	}
	if len(sv.Schedule) > maxSchedule {
		sv.MoreSchedule = len(sv.Schedule) - maxSchedule
		sv.Schedule = sv.Schedule[:maxSchedule]
	}
	sv.Doc = s.Doc
	if f := "linearizability-" + s.ID().String() + ".html"; exists(f) {
		sv.Lin = f
	}
	if f := "trace-" + s.ID().String() + ".txt"; exists(f) {
		sv.Trace = f
	}
	// What the page draws of the history: all of it, or one part of
	// one too large to draw (history.History.Drawable).
	h, whole := s.History(), true
	if h != nil {
		h, whole = h.Drawable()
	}
	views, wide, detail := keyViews(s, h, sv.Anchor, lim.KeyRows)
	sv.Wide = wide
	sv.TotalKeys = len(views)
	if !whole {
		sv.Part = fmt.Sprintf("The run was too large to draw whole (%d calls, held on disk while it ran): the keys and the timeline below are those of one part of it, %d of its %d keys, each key whole; every call is in history.jsonl, every violation in the list above.",
			s.Ops, len(views), s.Keys)
	}
	// The first keys of each kind, up to its limit, are shown (and told
	// in detail); the rest are counted.
	violated := map[string]bool{}
	nv, no := 0, 0
	show := func(v *keyView, seen *int, limit int, hidden *int) {
		if *seen < limit {
			detail(v)
			sv.Keys = append(sv.Keys, v)
		} else {
			*hidden++
		}
		*seen++
	}
	for _, v := range views {
		if v.Violated {
			violated[v.Key] = true
			show(v, &nv, lim.ViolatedKeys, &sv.HiddenViolated)
		} else {
			show(v, &no, lim.OtherKeys, &sv.HiddenOther)
		}
	}
	if h != nil {
		tl := buildTimeline(h, tlCap, violated)
		sv.Timeline = &tl
	}
	return sv
}

// anchorSafe keeps letters, digits, '-' and '_' for an HTML id.
func anchorSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// countString prints a map of counts as "3 claimed, 5 in-flight", sorted.
func countString(m map[string]int, none string) string {
	if len(m) == 0 {
		return none
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}
