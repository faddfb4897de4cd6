package htmlreport

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
)

func run(t *testing.T, variant string, scenarios ...string) *results.Summary {
	t.Helper()
	return runScenario(t, "memory", variant, scenarios...)
}

// runScenario runs one scenario against a variant of a backend; SQLite
// files go to the test's temporary directory.
func runScenario(t *testing.T, store, variant string, scenarios ...string) *results.Summary {
	t.Helper()
	b, err := stores.Lookup(store)
	if err != nil {
		t.Fatal(err)
	}
	o := harness.DefaultOptions()
	o.Backend, o.Variant, o.Scenarios, o.Addr = b, variant, scenarios, t.TempDir()
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("run %s/%s %v: %v", store, variant, scenarios, err)
	}
	return sum
}

// failingRun runs the mutant on the store's race scenario until the run
// fails, up to raceTries times, and returns the failing run. A race is
// one of goroutines: on a loaded machine a run may see no two claims
// (each survivor is logged with what it measured). These tests need a
// failing run to render; the race's power is the hunts' concern
// (harness/hunt).
func failingRun(t *testing.T, store, variant string) *results.Summary {
	t.Helper()
	for try := 1; ; try++ {
		sum := runScenario(t, store, variant, "race")
		if sum.Verdict == check.Fail && len(sum.Violations) > 0 {
			return sum
		}
		sc := sum.Scenarios[0]
		t.Logf("try %d: %s survived race on %s (verdict %s, %d calls, at most %d Begins at once on a key, %d work runs, notes %q)",
			try, variant, store, sum.Verdict, sc.Ops, sc.MaxConcurrentBegins, sc.WorkRuns, sc.Notes)
		if try == raceTries {
			t.Fatalf("%s survived race on %s %d times: nothing to show", variant, store, raceTries)
		}
	}
}

// raceTries bounds failingRun's runs.
const raceTries = 3

// writeDir writes the results directory and the report with lim, and
// returns the report's text.
func writeDir(t *testing.T, sum *results.Summary, lim Limits) (dir, html string) {
	t.Helper()
	rd, err := report.PrepareRunDir(t.TempDir(), sum.Store, sum.Variant, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.Write(sum); err != nil {
		t.Fatal(err)
	}
	if err := WriteLimits(rd.Path, sum, lim); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(rd.Path, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return rd.Path, string(b)
}

var (
	opBox      = regexp.MustCompile(`<div class="b (claimed|replay|inflight|mismatch|fenced|completed|released|prune|unknown)`)
	workBox    = regexp.MustCompile(`<div class="b work`)
	violRow    = regexp.MustCompile(`<tr class="violation" data-checker="([^"]*)" data-key="([^"]*)"`)
	external   = regexp.MustCompile(`(?i)(src=|<link|@import|url\(\s*['"]?(https?:)?//|https?://)`)
	bandDiv    = regexp.MustCompile(`<div class="band (fk-[a-z0-9]+)"`)
	omittedMsg = regexp.MustCompile(`Showing the first (\d+) of (\d+) store calls; (\d+) calls`)
)

// A failing run: every violation has a row naming its checker and key, the
// timeline has a box per call and work run, and nothing is fetched.
func TestWriteFailingRun(t *testing.T) {
	sum := failingRun(t, "memory", "select-then-insert")
	_, html := writeDir(t, sum, DefaultLimits)
	h := sum.Scenarios[0].History()
	if got, want := len(opBox.FindAllString(html, -1)), len(h.Ops()); got != want {
		t.Errorf("%d store-call boxes, want %d", got, want)
	}
	if got, want := len(workBox.FindAllString(html, -1)), len(h.Work()); got != want {
		t.Errorf("%d work boxes, want %d", got, want)
	}
	rows := map[string]bool{}
	for _, m := range violRow.FindAllStringSubmatch(html, -1) {
		rows[m[1]+" "+m[2]] = true
	}
	for _, v := range sum.Violations {
		if !rows[v.Checker+" "+templateEscape(v.Key)] {
			t.Errorf("no violation row for %s on %s", v.Checker, v.Key)
		}
		if !strings.Contains(html, templateEscape(v.Detail)) {
			t.Errorf("the explanation of %s on %s is missing: %s", v.Checker, v.Key, v.Detail)
		}
	}
	if m := external.FindString(html); m != "" {
		t.Errorf("the report refers to something outside itself: %q", m)
	}
	if !strings.Contains(html, `<header class="hd fail">`) {
		t.Errorf("the header is not marked as failing")
	}
	for _, f := range []string{"history.jsonl", "linearizability-race.html", "trace-race.txt"} {
		if !strings.Contains(html, `href="`+f+`"`) {
			t.Errorf("no link to %s", f)
		}
	}
	t.Logf("report.html: %d bytes for %d calls", len(html), len(h.Ops()))
}

// templateEscape escapes s as html/template escapes text.
func templateEscape(s string) string {
	r := strings.NewReplacer(`&`, "&amp;", `'`, "&#39;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;", "+", "&#43;")
	return r.Replace(s)
}

// A passing run with faults: no violation rows, pause windows shaded, a
// verdict cell per scenario and checker.
func TestWritePassingRunWithFaults(t *testing.T) {
	sum := run(t, stores.Correct, "takeover", "crash")
	if sum.Verdict != check.Pass {
		t.Fatalf("correct memory store: verdict %s: %v", sum.Verdict, sum.Violations)
	}
	_, html := writeDir(t, sum, DefaultLimits)
	if n := len(violRow.FindAllString(html, -1)); n != 0 {
		t.Errorf("%d violation rows in a passing run", n)
	}
	kinds := map[string]int{}
	for _, m := range bandDiv.FindAllStringSubmatch(html, -1) {
		kinds[m[1]]++
	}
	if kinds["fk-pause"] == 0 || kinds["fk-crash"] == 0 {
		t.Errorf("fault bands %v, want pause (takeover) and crash (crash) windows", kinds)
	}
	// Each checker has a cell per scenario: a pass, or a pass that
	// judged nothing, marked as such.
	judged, vacuous := 0, 0
	for _, s := range sum.Scenarios {
		for _, r := range s.Checkers {
			if r.Judged > 0 {
				judged++
			} else {
				vacuous++
			}
		}
	}
	if got := strings.Count(html, `<td class="v pass" title=`); got != judged || judged+vacuous != len(sum.Scenarios)*len(check.Docs) {
		t.Errorf("%d passing checker cells, want %d (of %d checkers run)", got, judged, judged+vacuous)
	}
	if got := strings.Count(html, `<td class="v" title="nothing to judge: `); got != vacuous || vacuous == 0 {
		t.Errorf("%d checker cells marked as having judged nothing, want %d", got, vacuous)
	}
	if !strings.Contains(html, `<header class="hd pass">`) {
		t.Errorf("the header is not marked as passing")
	}
	// Two scenarios with a history share the run's budget of calls.
	for _, c := range []struct{ ops, total, want int }{{2000, 1200, 600}, {2000, 600, 500}, {300, 600, 300}, {2000, 0, 2000}} {
		if got := (Limits{TimelineOps: c.ops, TimelineTotal: c.total}).timelineCap(sum); got != c.want {
			t.Errorf("cap with %d per scenario, %d in all, 2 scenarios: %d, want %d", c.ops, c.total, got, c.want)
		}
	}
}

// The timeline is capped: the first N calls are drawn, and the report says
// how many it left out and links to the history.
func TestTimelineCap(t *testing.T) {
	sum := failingRun(t, "memory", "select-then-insert")
	// How many keys the mutant broke depends on the machine's load: show
	// one fewer than that. The page counts the keys it marks violated (a
	// violation named by its order marks each key of the order), not the
	// violations' names.
	views, _, _ := keyViews(&sum.Scenarios[0], sum.Scenarios[0].History(), "", 0)
	broken := 0
	for _, v := range views {
		if v.Violated {
			broken++
		}
	}
	if broken == 0 {
		t.Fatalf("select-then-insert broke no key: %s", sum.Verdict)
	}
	lim := DefaultLimits
	lim.TimelineOps, lim.OtherKeys, lim.ViolatedKeys = 10, 0, broken-1
	_, html := writeDir(t, sum, lim)
	total := len(sum.Scenarios[0].History().Ops())
	if got := len(opBox.FindAllString(html, -1)); got != 10 {
		t.Errorf("%d store-call boxes, want the cap: 10", got)
	}
	m := omittedMsg.FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no note of the calls left out")
	}
	if m[1] != "10" || m[2] != fmt.Sprint(total) || m[3] != fmt.Sprint(total-10) {
		t.Errorf("note says first %s of %s, %s left out; want 10 of %d, %d", m[1], m[2], m[3], total, total-10)
	}
	if !strings.Contains(html, `left out — the whole history is in <a href="history.jsonl">`) {
		t.Errorf("no link to history.jsonl next to the cap")
	}
	if n := strings.Count(html, `<details class="key`); n != lim.ViolatedKeys {
		t.Errorf("%d keys detailed, want the cap: %d", n, lim.ViolatedKeys)
	}
	// Every passing key is left out too (OtherKeys 0): on a loaded machine
	// the mutant may break only some of the keys.
	if want := fmt.Sprintf("not shown: 1 more violated and %d more passing keys", len(views)-broken); !strings.Contains(html, want) {
		t.Errorf("no note %q (%d violated keys of %d, %d shown)", want, broken, len(views), lim.ViolatedKeys)
	}
}

// Any fault kind renders: a server-wide fault with a kind the report has
// never heard of gets a band and a description.
func TestTimelineGenericFault(t *testing.T) {
	b, err := stores.Lookup("memory")
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Open(context.Background(), "", stores.Config{LockTTL: time.Second, Retention: time.Minute, Variant: stores.Correct})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := history.New()
	rec := &history.Recorder{Store: st, Client: 3, Hist: h, Clock: faults.RealClock{}}
	key := stores.KeyRef{Tenant: "t0", Key: "order-o001"}
	start := h.Now()
	d, err := rec.Begin(context.Background(), stores.Request{KeyRef: key, Fingerprint: "fp", Now: time.Now()})
	if err != nil || d.Outcome != stores.Claimed {
		t.Fatalf("Begin: %v %v", d.Outcome, err)
	}
	time.Sleep(2 * time.Millisecond)
	h.AddFault(history.Fault{Client: -1, Kind: "network-partition", Failpoint: "", Start: start, End: h.Now()})
	if err := rec.Complete(context.Background(), key, d.Token, stores.Response{Status: 200, Body: "ok"}); err != nil {
		t.Fatal(err)
	}
	tl := buildTimeline(h, 100, map[string]bool{key.String(): true})
	if len(tl.Bands) != 1 || !strings.HasPrefix(tl.Bands[0].Class, "fk-other") {
		t.Fatalf("bands %+v, want one fk-other band", tl.Bands)
	}
	if !strings.Contains(tl.Bands[0].Title, "network-partition of client -1") || !strings.Contains(tl.Bands[0].Label, "network-partition") {
		t.Errorf("band %+v does not describe the fault", tl.Bands[0])
	}
	if len(tl.Lanes) != 1 || len(tl.Boxes) != 2 {
		t.Fatalf("lanes %d, boxes %d: want 1 lane (client 3) and 2 boxes (no lane for a server fault)", len(tl.Lanes), len(tl.Boxes))
	}
	for _, bx := range tl.Boxes {
		if !strings.Contains(bx.Class, " v") {
			t.Errorf("box %q on a violated key is not marked", bx.Label)
		}
	}
	if tl.Boxes[0].Y >= tl.Boxes[1].Y || tl.Boxes[0].Y+tl.Boxes[0].H > tl.Boxes[1].Y {
		t.Errorf("Begin box %+v and Complete box %+v overlap or are out of order", tl.Boxes[0], tl.Boxes[1])
	}
	// the fault started with Begin and ended before Complete: the band
	// covers Begin's box and ends before Complete's.
	bd := tl.Bands[0]
	if bd.Y > tl.Boxes[0].Y || bd.Y+bd.H > tl.Boxes[1].Y {
		t.Errorf("band %d..%d is not where the fault was (Begin at %d, Complete at %d)", bd.Y, bd.Y+bd.H, tl.Boxes[0].Y, tl.Boxes[1].Y)
	}
}
