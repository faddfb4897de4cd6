package hunt

import (
	"html/template"
	"io"
	"slices"
)

// The demo's page: one table per run (the mutant's, then the correct
// store's), a lane per client, the key's row between the first lane and the
// others, and between steps the failpoints where the scheduler switched
// from one client to another. It is one self-contained file (no script, no
// fetched resource), for a browser or a review attached to a ticket.

// demoPage is what the page template renders.
type demoPage struct {
	Info    *DemoInfo
	Runs    []demoPageRun
	Verdict string
}

type demoPageRun struct {
	Title  string
	Run    *DemoRun
	Lanes  []string // the clients, in the order they first ran
	Steps  []demoPageStep
	Caught bool
}

type demoPageStep struct {
	N      int
	Switch string
	Cells  []string // one per lane: the step's text in its client's lane
	Result string
	Row    string
	Lane   int  // the lane of the step's client; -1 none (a clock tick)
	Wide   bool // not a client's step: it spans the lanes
}

// WriteDemoHTML writes the demo's step-by-step page.
func WriteDemoHTML(w io.Writer, info *DemoInfo, bad, good *DemoRun) error {
	p := demoPage{Info: info, Verdict: Verdict(info, bad, good)}
	correct := "correct store, same schedule"
	if info.Found {
		correct = "correct store and clients, same episode"
	}
	for _, r := range []struct {
		title string
		run   *DemoRun
	}{{"mutant: " + info.Mutant, bad}, {correct, good}} {
		pr := demoPageRun{Title: r.title, Run: r.run, Caught: len(r.run.Caught) > 0}
		for _, l := range r.run.Lines {
			if l.Client != "" && !slices.Contains(pr.Lanes, l.Client) {
				pr.Lanes = append(pr.Lanes, l.Client)
			}
		}
		for i, l := range r.run.Lines {
			st := demoPageStep{N: i + 1, Switch: l.Switch, Result: l.Result, Row: l.Row, Lane: slices.Index(pr.Lanes, l.Client)}
			st.Cells = make([]string, len(pr.Lanes))
			if st.Lane < 0 {
				st.Wide, st.Cells = true, []string{l.Text}
			} else {
				st.Cells[st.Lane] = l.Text
			}
			pr.Steps = append(pr.Steps, st)
		}
		p.Runs = append(p.Runs, pr)
	}
	return demoTemplate.Execute(w, p)
}

var demoTemplate = template.Must(template.New("demo").Funcs(template.FuncMap{
	"add": func(a, b int) int { return a + b },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>idemcheck demo: {{.Info.Mutant}} on {{.Info.Store}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:2em}
table.demo{border-collapse:collapse;width:100%;table-layout:fixed}
table.demo th,table.demo td{border:1px solid #ccc;padding:.3em .5em;vertical-align:top;word-wrap:break-word}
table.demo th.n,table.demo td.n{width:2.5em;text-align:right;color:#777}
td.lane code{font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap}
td.row{background:#f6f6ee;font:12px ui-monospace,monospace}
th.row{background:#f6f6ee}
tr.switch td{background:#eef3fb;color:#335;font-size:12px;border-top:2px solid #8aa}
tr.wide td{background:#fdf3e3;font-style:italic}
.result{display:block;color:#064;margin-top:.2em}
p.harm{font-weight:bold}p.harm.bad{color:#a00}p.harm.good{color:#064}p.harm.undecided{color:#850}
pre.trace{font-size:12px;background:#f8f8f8;padding:.5em;overflow-x:auto}
#verdict{border:2px solid #a00;padding:.6em;font-weight:bold}
</style></head><body>
<header><h1>idemcheck demo: {{.Info.Mutant}} ({{.Info.Side}} side) on {{.Info.Store}}</h1>
<p class="story">{{.Info.Story}}. LockTTL {{.Info.LockTTL}}.{{if .Info.Found}} Found by hunting with scenario {{.Info.Scenario}}, shrunk to the shortest episode found.{{end}}</p></header>
<main>
{{range $ri, $r := .Runs}}
<section class="run" data-variant="{{$r.Run.Variant}}">
<h2>{{$r.Title}}</h2>
{{if $r.Steps}}
<table class="demo">
<thead><tr><th class="n">#</th>{{range $i, $l := $r.Lanes}}<th class="lane">client {{$l}}</th>{{if eq $i 0}}<th class="row">the key's row after the step</th>{{end}}{{end}}</tr></thead>
<tbody>
{{range $r.Steps}}
{{if .Switch}}<tr class="switch"><td class="n"></td><td colspan="{{add (len $r.Lanes) 1}}">⇄ the scheduler switched: {{.Switch}}</td></tr>{{end}}
{{if .Wide}}<tr class="wide"><td class="n">{{.N}}</td><td colspan="{{add (len $r.Lanes) 1}}">{{index .Cells 0}}</td></tr>
{{else}}<tr class="step">
<td class="n">{{.N}}</td>
{{$step := .}}{{range $i, $c := .Cells}}<td class="lane{{if $c}} active{{end}}" data-lane="{{index $r.Lanes $i}}">{{if $c}}<code>{{$c}}</code>{{if $step.Result}}<span class="result">→ {{$step.Result}}</span>{{end}}{{end}}</td>{{if eq $i 0}}<td class="row">{{$step.Row}}</td>{{end}}{{end}}
</tr>{{end}}
{{end}}
</tbody></table>
{{end}}
{{if $r.Run.Trace}}<p>The order's history (each call and its answer, the work, the provider's charges):</p>
<pre class="trace">{{range $r.Run.Trace}}{{.}}
{{end}}</pre>{{end}}
{{if $r.Run.Answers}}<ul class="answers">{{range $r.Run.Answers}}<li>{{.}}</li>{{end}}</ul>{{end}}
<p class="harm {{if $r.Caught}}bad{{else if $r.Run.NotJudged}}undecided{{else}}good{{end}}">{{$r.Run.Harm}}</p>
{{if $r.Caught}}<p class="caught">caught by: {{range $i, $c := $r.Run.Caught}}{{if $i}}, {{end}}<span class="checker">{{$c}}</span>{{end}}</p>{{end}}
</section>
{{end}}
<p id="verdict">{{.Verdict}}</p>
</main></body></html>
`))
