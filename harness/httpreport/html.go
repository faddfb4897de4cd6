package httpreport

import (
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/httpcheck"
)

// HTMLFile is the name of the page [WriteDir] writes.
const HTMLFile = "report.html"

// page is what the HTML template renders.
type page struct {
	Verdict   string
	Nothing   string // the answers checker's message when nothing was tested
	Run       Run
	Results   []pageResult
	Lanes     []lane
	Span      string
	ByVia     []viaCount
	Crashes   []pageCrash
	Timelines []pageTimeline
}

type pageResult struct {
	Checker, Verdict, Applied, Detail string
	Causes                            []causeCount
	Notes                             []string
}

type causeCount struct {
	Cause string
	N     int
}

// lane is one instance: its faults (shaded), its requests (bars, by
// their answer) and the charges it made (marks; dup when the order was
// charged more than once).
type lane struct {
	Name     string
	Faults   []mark
	Requests []mark
	Charges  []mark
}

// mark is one thing on a lane at Left% for Width% of the run.
type mark struct {
	Left, Width float64
	Class       string
	Title       string
}

type viaCount struct {
	Via        string
	Charges    int
	Duplicates int
}

type pageCrash struct {
	Instance, At, Status, Restarted, Log string
}

type pageTimeline struct {
	Checker, Cause, Detail string
	N                      int
	Lines                  []string
}

// WriteHTML writes the run's page: the verdicts with their counts per
// cause, one lane per instance (faults shaded, requests by their answer,
// the charges it made, the duplicated ones marked), the charges by
// instance, the crashes, and one timeline per checker and cause. The page
// is one self-contained file: no script or style is fetched.
func WriteHTML(w io.Writer, run Run, h *history.History, l *history.Ledger, results []httpcheck.Result) error {
	xs, fs, cs := h.Exchanges(), h.Faults(), l.Charges()
	p := page{Verdict: Overall(results), Run: run, Nothing: httpcheck.NothingTested(results, run.Interrupted != "")}
	for _, r := range results {
		pr := pageResult{Checker: r.Checker, Verdict: strings.ToLower(Word(r)), Applied: "applied", Detail: r.Detail, Notes: r.Notes}
		if r.Unjudged != "" {
			pr.Notes = append([]string{"not judged: " + r.Unjudged}, pr.Notes...)
		}
		if !r.Applied {
			pr.Applied = "did not apply"
		}
		counts := r.CauseCounts()
		for c, n := range counts {
			if c != "" {
				pr.Causes = append(pr.Causes, causeCount{c, n})
			}
		}
		sort.Slice(pr.Causes, func(i, j int) bool { return pr.Causes[i].Cause < pr.Causes[j].Cause })
		p.Results = append(p.Results, pr)
		if r.Checker == httpcheck.Answers && !r.Pass {
			continue // the page says it first (p.Nothing)
		}
		shown := map[string]bool{}
		for _, v := range r.Violations {
			if !shown[v.Cause] {
				shown[v.Cause] = true
				p.Timelines = append(p.Timelines, pageTimeline{Checker: r.Checker, Cause: v.Cause, Detail: v.Detail, N: counts[v.Cause],
					Lines: Timeline(xs, cs, fs, v.Key)})
			}
		}
	}
	// The run's span, and one lane per instance in order of appearance.
	var end int64 = 1
	names := []string{}
	seen := map[string]bool{}
	addName := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, x := range xs {
		addName(x.Instance)
		end = max(end, x.Call, x.ErrAt)
		if x.Answered() {
			end = max(end, x.Return)
		}
	}
	for _, c := range cs {
		addName(c.Via)
		end = max(end, c.At, c.End)
	}
	for _, f := range fs {
		end = max(end, f.End)
	}
	sort.Strings(names)
	pct := func(t int64) float64 { return 100 * float64(min(max(t, 0), end)) / float64(end) }
	span := func(from, to int64) (float64, float64) {
		l, r := pct(from), pct(to)
		return l, max(r-l, 0.05)
	}
	idx := map[string]int{}
	for i, n := range names {
		idx[n] = i
		p.Lanes = append(p.Lanes, lane{Name: n})
	}
	for _, f := range fs {
		i, ok := idx[f.Failpoint]
		if !ok {
			continue
		}
		left, width := span(f.Start, f.End)
		p.Lanes[i].Faults = append(p.Lanes[i].Faults, mark{left, width, "f " + string(f.Kind),
			fmt.Sprintf("%s %s–%s", f.Kind, ms(f.Start), ms(f.End))})
	}
	for _, x := range xs {
		i, ok := idx[x.Instance]
		if !ok {
			continue
		}
		to, class := x.Return, statusClass(x.Status)
		if !x.Answered() {
			to = max(x.ErrAt, x.Call)
		}
		left, width := span(x.Call, to)
		p.Lanes[i].Requests = append(p.Lanes[i].Requests, mark{left, width, "x " + class,
			fmt.Sprintf("%s key %s client %d: %s at %s", x.Purpose, x.Key, x.Client, answerText(x), ms(x.Call))})
	}
	perOrder := map[string]int{}
	for _, c := range cs {
		if c.Effective {
			perOrder[c.Order]++
		}
	}
	byVia := map[string]*viaCount{}
	for _, c := range cs {
		if !c.Effective {
			continue
		}
		v := c.Via
		if v == "" {
			v = "?"
		}
		if byVia[v] == nil {
			byVia[v] = &viaCount{Via: v}
		}
		byVia[v].Charges++
		class := "c"
		if perOrder[c.Order] > 1 {
			class += " dup"
			byVia[v].Duplicates++
		}
		if i, ok := idx[c.Via]; ok {
			left, _ := span(c.At, c.At)
			p.Lanes[i].Charges = append(p.Lanes[i].Charges, mark{left, 0, class, fmt.Sprintf("%s order %s at %s (%s)", c.ID, c.Order, ms(c.At), c.Outcome)})
		}
	}
	for _, v := range byVia {
		p.ByVia = append(p.ByVia, *v)
	}
	sort.Slice(p.ByVia, func(i, j int) bool { return p.ByVia[i].Via < p.ByVia[j].Via })
	for _, c := range run.Crashes {
		pc := pageCrash{Instance: c.Instance, At: ms(c.At), Status: c.Status, Log: c.LogTail, Restarted: "not restarted: " + c.Err}
		if c.Restarted > 0 {
			pc.Restarted = "answering again at " + ms(c.Restarted)
		}
		p.Crashes = append(p.Crashes, pc)
	}
	p.Span = ms(end)
	return pageTmpl.Execute(w, p)
}

func statusClass(s int) string {
	switch {
	case s == 0:
		return "none"
	case s >= 200 && s < 300:
		return "ok"
	case s == 409 || s == 423 || s == 429:
		return "busy"
	case s >= 500:
		return "err"
	}
	return "client"
}

func answerText(x history.Exchange) string {
	if !x.Answered() {
		return "no answer (" + x.Err + ")"
	}
	return fmt.Sprint(x.Status)
}

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>idemcheck http: {{.Verdict}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{padding:12px 20px;background:#f4f4f4;border-bottom:1px solid #ddd}
header h1{margin:0;font-size:20px}
main{padding:12px 20px}
.nothing{background:#fdd;border:2px solid #c00;padding:8px 12px;font-weight:bold}
table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
td.v.fail{background:#fcc;font-weight:bold}td.v.pass{background:#cfc}
.lanes{position:relative;margin:8px 0 8px 60px}
.lane{position:relative;height:54px;border-bottom:1px solid #ccc}
.lane .name{position:absolute;left:-58px;top:18px;font-weight:bold}
.lane .f{position:absolute;top:0;bottom:0;background:rgba(255,150,0,.25)}
.lane .f.instance-kill,.lane .f.instance-exit{background:rgba(220,0,0,.25)}
.lane .x{position:absolute;height:6px;top:6px;min-width:1px}
.x.ok{background:#2a2}.x.err{background:#c22;top:14px}.x.busy{background:#d90;top:22px}.x.client{background:#66c;top:30px}.x.none{background:#888;top:22px}
.lane .c{position:absolute;top:40px;width:3px;height:12px;background:#036}
.lane .c.dup{background:#e00;width:5px}
pre{background:#f8f8f8;padding:6px;overflow-x:auto;font-size:12px}
</style></head><body>
<header><h1>idemcheck http: {{.Verdict}}</h1><div>{{len .Run.Targets}} instance(s), {{.Run.Clients}} clients, {{.Run.Duration}}, seed {{.Run.Seed}}{{if .Run.Command}}; command <code>{{.Run.Command}}</code>{{end}}</div></header>
<main>
{{if .Nothing}}<p class="nothing" id="nothing">NOTHING TESTED: {{.Nothing}}</p>{{end}}
<h2>Verdicts</h2>
<table class="summary"><tr><th>checker</th><th>verdict</th><th>applied</th><th>causes</th><th>detail</th></tr>
{{range .Results}}<tr class="result" data-checker="{{.Checker}}"><td>{{.Checker}}</td><td class="v {{.Verdict}}">{{.Verdict}}</td><td>{{.Applied}}</td>
<td>{{range .Causes}}<span class="cause" data-cause="{{.Cause}}" data-n="{{.N}}">{{.Cause}}: {{.N}}</span><br>{{end}}</td>
<td>{{.Detail}}{{range .Notes}}<div class="note">note: {{.}}</div>{{end}}</td></tr>
{{end}}</table>
{{if .Run.Declared}}<h2>Declared</h2><ul class="declared">{{range .Run.Declared}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Crashes}}<h2>Crashes</h2><table class="crashes"><tr><th>instance</th><th>exited at</th><th>status</th><th>then</th><th>log tail</th></tr>
{{range .Crashes}}<tr class="crash"><td>{{.Instance}}</td><td>{{.At}}</td><td>{{.Status}}</td><td>{{.Restarted}}</td><td><pre>{{.Log}}</pre></td></tr>{{end}}</table>{{end}}
<h2>Instances</h2>
<p>0 to {{.Span}}: shaded, the faults (red: a kill or an exit); bars, the requests (green 2xx, red 5xx, amber 409/423/429, blue other 4xx, grey no answer); marks below, the charges the instance made (red: an order charged more than once).</p>
<div class="lanes">{{range .Lanes}}<div class="lane" data-instance="{{.Name}}"><span class="name">{{.Name}}</span>
{{range .Faults}}<div class="{{.Class}}" style="left:{{.Left}}%;width:{{.Width}}%" title="{{.Title}}"></div>{{end}}
{{range .Requests}}<div class="{{.Class}}" style="left:{{.Left}}%;width:{{.Width}}%" title="{{.Title}}"></div>{{end}}
{{range .Charges}}<div class="{{.Class}}" style="left:{{.Left}}%" title="{{.Title}}"></div>{{end}}
</div>{{end}}</div>
<h2>Charges by instance</h2>
<table class="byvia"><tr><th>instance</th><th>charges</th><th>of orders charged more than once</th></tr>
{{range .ByVia}}<tr><td>{{.Via}}</td><td>{{.Charges}}</td><td>{{.Duplicates}}</td></tr>{{end}}</table>
{{if .Timelines}}<h2>One timeline per cause</h2>{{range .Timelines}}
<section class="timeline" data-checker="{{.Checker}}" data-cause="{{.Cause}}"><h3>{{.Checker}} [{{.Cause}}] (the first of {{.N}})</h3><p>{{.Detail}}</p>
<pre>{{range .Lines}}{{.}}
{{end}}</pre></section>{{end}}{{end}}
</main></body></html>
`))
