package httpreport

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idemcheck/idemcheck/harness/httpcheck"
	"github.com/idemcheck/idemcheck/internal/browsertest"
)

// dom is what the page shows, read from its DOM.
type dom struct {
	Header    string   `json:"header"`
	Lanes     []string `json:"lanes"`
	LaneWidth []int    `json:"laneWidth"`
	Requests  int      `json:"requests"`
	Laid      int      `json:"laid"` // request bars with a laid-out rectangle
	Charges   int      `json:"charges"`
	Dups      int      `json:"dups"`
	Faults    []string `json:"faults"`
	Fails     []string `json:"fails"`
	Causes    []string `json:"causes"`
	Timelines []string `json:"timelines"`
	Crashes   int      `json:"crashes"`
	Resources int      `json:"resources"`
}

const readPage = `(() => {
  const q = s => Array.from(document.querySelectorAll(s));
  return {
    header: document.querySelector('header h1').textContent,
    lanes: q('.lane').map(l => l.dataset.instance),
    laneWidth: q('.lane').map(l => Math.round(l.getBoundingClientRect().width)),
    requests: q('.lane .x').length,
    laid: q('.lane .x').filter(b => { const r = b.getBoundingClientRect(); return r.width >= 1 && r.height >= 5; }).length,
    charges: q('.lane .c').length,
    dups: q('.lane .c.dup').length,
    faults: q('.lane .f').map(f => f.closest('.lane').dataset.instance + ' ' + f.className),
    fails: q('table.summary tr.result').filter(tr => tr.querySelector('td.v.fail')).map(tr => tr.dataset.checker),
    causes: q('span.cause').map(s => s.dataset.cause + '=' + s.dataset.n),
    timelines: q('section.timeline').map(s => s.dataset.checker + ':' + s.dataset.cause),
    crashes: q('table.crashes tr.crash').length,
    resources: performance.getEntriesByType('resource').length,
  };
})()`

// TestPageInChromium opens the page of a recorded run in headless
// Chromium and checks from the DOM: one lane per instance, every request
// laid out, each charge marked on the lane of the instance that made it
// (the twice-charged orders' charges marked), the faults shaded on their
// instance's lane, the failed checker with its counts per cause, one
// timeline per cause, the crash, and nothing fetched.
func TestPageInChromium(t *testing.T) {
	bin := browsertest.Find(t, os.Getenv("IDEM_REQUIRE_SERVERS") == "1")
	run, h, l := fixture()
	dir := t.TempDir()
	if err := WriteDir(dir, run, h, l, httpcheck.Run(httpcheck.Evidence{Hist: h, Ledger: l})); err != nil {
		t.Fatal(err)
	}
	ctx := browsertest.Open(t, bin, 1400, 1200, 60*time.Second)
	url := "file://" + filepath.Join(dir, HTMLFile)
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[dom](readPage))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	t.Logf("page: %+v", got)
	if got.Header != "idemcheck http: FAIL" {
		t.Errorf("header %q", got.Header)
	}
	if len(got.Lanes) != 2 || got.Lanes[0] != "i1" || got.Lanes[1] != "i2" || got.LaneWidth[0] < 500 {
		t.Errorf("lanes %v (widths %v), want i1 and i2 laid out", got.Lanes, got.LaneWidth)
	}
	if n := len(h.Exchanges()); got.Requests != n || got.Laid != n {
		t.Errorf("%d request bars (%d laid out), want %d", got.Requests, got.Laid, n)
	}
	if got.Charges != 6 || got.Dups != 6 {
		t.Errorf("%d charge marks (%d marked twice-charged), want 6 and 6", got.Charges, got.Dups)
	}
	if len(got.Faults) != 2 || got.Faults[0] != "i1 f instance-exit" || got.Faults[1] != "i2 f instance-kill" {
		t.Errorf("faults %v", got.Faults)
	}
	if len(got.Fails) != 2 || got.Fails[0] != httpcheck.AtMostOnce || got.Fails[1] != httpcheck.Replay {
		t.Errorf("failed checkers %v", got.Fails)
	}
	want := map[string]bool{"after-done=2": true, "concurrent=1": true}
	for _, c := range got.Causes {
		delete(want, c)
	}
	if len(want) > 0 {
		t.Errorf("causes %v lack %v", got.Causes, want)
	}
	if len(got.Timelines) != 3 {
		t.Errorf("timelines %v: want one per checker and cause (at-most-once: after-done, concurrent; replay-fidelity)", got.Timelines)
	}
	if got.Crashes != 1 || got.Resources != 0 {
		t.Errorf("%d crash rows, %d resources fetched", got.Crashes, got.Resources)
	}
	if d := os.Getenv("IDEM_SCREENSHOT_DIR"); d != "" {
		if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
			_ = os.MkdirAll(d, 0o755)
			_ = os.WriteFile(filepath.Join(d, "http-report.png"), png, 0o644)
		}
	}
}
