package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/internal/browsertest"
)

// demoDOM is what the demo page shows, read from its DOM.
type demoDOM struct {
	Title    string     `json:"title"`
	Sections []string   `json:"sections"` // each run's data-variant
	Lanes    [][]string `json:"lanes"`    // each run's lane headers
	// RowBetween: in each run, the row column's header lies between the
	// first lane's and the second's on screen.
	RowBetween []bool     `json:"rowBetween"`
	Steps      []int      `json:"steps"`    // each run's step rows
	Active     [][]string `json:"active"`   // each run's steps: the lane of the filled cell
	Switches   []string   `json:"switches"` // the mutant run's switch rows
	Rows       []string   `json:"rows"`     // the mutant run's row column, step by step
	Harm       []string   `json:"harm"`
	Verdict    string     `json:"verdict"`
	Resources  int        `json:"resources"`
}

const readDemoDOM = `(() => {
  const q = (s, r) => Array.from((r || document).querySelectorAll(s));
  const runs = q('section.run');
  return {
    title: document.querySelector('header h1').textContent,
    sections: runs.map(s => s.dataset.variant),
    lanes: runs.map(s => q('th.lane', s).map(th => th.textContent)),
    rowBetween: runs.map(s => {
      const l = q('th.lane', s), r = s.querySelector('th.row');
      if (l.length < 2 || !r) return false;
      const a = l[0].getBoundingClientRect(), b = r.getBoundingClientRect(), c = l[1].getBoundingClientRect();
      return a.right <= b.left + 1 && b.right <= c.left + 1 && b.width > 20;
    }),
    steps: runs.map(s => q('tr.step', s).length),
    active: runs.map(s => q('tr.step', s).map(tr => { const c = tr.querySelector('td.lane.active'); return c ? c.dataset.lane : ''; })),
    switches: q('tr.switch', runs[0]).map(tr => tr.textContent.trim()),
    rows: q('tr.step td.row', runs[0]).map(td => td.textContent.trim()),
    harm: q('p.harm').map(p => p.textContent),
    verdict: document.getElementById('verdict').textContent,
    resources: performance.getEntriesByType('resource').length,
  };
})()`

// TestDemoHTMLInChromium: demo --html writes a page that Chromium lays out
// as the demo says: one section per run, a lane per client with the key's
// row column between the first two, each step in its client's lane, the
// scheduler's switches between steps, the harm and the verdict; and the
// page fetches nothing.
func TestDemoHTMLInChromium(t *testing.T) {
	bin := browsertest.Find(t, servers.Required())
	page := filepath.Join(t.TempDir(), "demo.html")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "select-then-insert", "--store", "memory", "--json", "--html", page}, &stdout, &stderr); code != exitPass {
		t.Fatalf("demo --html: exit %d: %s", code, stderr.String())
	}
	var demo struct {
		Mutant  hunt.DemoRun `json:"mutant_run"`
		Correct hunt.DemoRun `json:"correct_run"`
		Verdict string       `json:"verdict"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &demo); err != nil {
		t.Fatal(err)
	}
	ctx := browsertest.Open(t, bin, 1400, 1800, 60*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitReady(chromedp.CSS("#verdict"))); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[demoDOM](readDemoDOM))
	if err != nil {
		t.Fatalf("read the page's DOM: %v", err)
	}
	if !strings.Contains(got.Title, "select-then-insert") || !slices.Equal(got.Sections, []string{"select-then-insert", "correct"}) {
		t.Errorf("title %q, sections %v", got.Title, got.Sections)
	}
	for i, run := range []hunt.DemoRun{demo.Mutant, demo.Correct} {
		if i >= len(got.Lanes) || !slices.Equal(got.Lanes[i], []string{"client A", "client B"}) || !got.RowBetween[i] {
			t.Errorf("run %d: lanes %v, row column between the lanes: %v", i, got.Lanes, got.RowBetween)
			continue
		}
		want := []string{} // the lane each client's step must fill, in order
		for _, l := range run.Lines {
			if l.Client != "" {
				want = append(want, l.Client)
			}
		}
		if got.Steps[i] != len(want) || !slices.Equal(got.Active[i], want) {
			t.Errorf("run %d: %d step rows, lanes filled %v; want %v", i, got.Steps[i], got.Active[i], want)
		}
	}
	if len(got.Switches) < 4 || !strings.Contains(got.Switches[1], "A waits at begin.after-select; B runs from") {
		t.Errorf("the switches between steps: %q", got.Switches)
	}
	var inFlight, done bool
	for _, r := range got.Rows {
		inFlight = inFlight || strings.HasPrefix(r, "status=in_flight token=")
		done = done || strings.HasPrefix(r, "status=done") && strings.Contains(r, "response=201")
	}
	if !inFlight || !done || len(got.Rows) == 0 || got.Rows[0] != "no row" {
		t.Errorf("the row column, step by step: %q", got.Rows)
	}
	if len(got.Harm) != 2 || !strings.HasPrefix(got.Harm[0], "DOUBLE CHARGE") || !strings.HasPrefix(got.Harm[1], "no harm") {
		t.Errorf("harm: %q", got.Harm)
	}
	if got.Verdict != demo.Verdict || !strings.Contains(got.Verdict, "caught by at-most-once") {
		t.Errorf("verdict on the page %q, in the JSON %q", got.Verdict, demo.Verdict)
	}
	if got.Resources != 0 {
		t.Errorf("the page fetched %d resources: it must be self-contained", got.Resources)
	}
}
