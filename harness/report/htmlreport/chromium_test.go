package htmlreport_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/report/htmlreport"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/internal/browsertest"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// EnvScreenshotDir, when set, is a directory the Chromium test also saves its
// screenshots into (CI keeps them as artifacts).
const EnvScreenshotDir = "IDEM_SCREENSHOT_DIR"

// findChromium returns the browser binary, or skips the test with a reason,
// or fails it when IDEM_REQUIRE_SERVERS=1 (CI must not skip it).
func findChromium(t *testing.T) string {
	t.Helper()
	return browsertest.Find(t, servers.Required())
}

// domReport is what the page shows, read from its DOM.
type domReport struct {
	Header       string   `json:"header"`
	Boxes        int      `json:"boxes"`
	VisibleBoxes int      `json:"visibleBoxes"` // boxes with a laid-out, non-empty rectangle
	ViolatedBox  int      `json:"violatedBoxes"`
	Lanes        []string `json:"lanes"`
	KeyRows      int      `json:"keyRows"`
	Violations   []string `json:"violations"` // text of every tr.violation
	SummaryFail  int      `json:"summaryFail"`
	Resources    int      `json:"resources"` // resources fetched besides the page
	Pinned       string   `json:"pinned"`    // the pinned description after clicking a violated box
	Highlighted  int      `json:"highlighted"`
}

const readDOM = `(() => {
  const q = s => Array.from(document.querySelectorAll(s));
  const boxes = q('.tl .b');
  const r = {
    header: document.querySelector('header h1').textContent,
    boxes: boxes.length,
    visibleBoxes: boxes.filter(b => { const c = b.getBoundingClientRect(); return c.width > 10 && c.height > 5; }).length,
    violatedBoxes: q('.tl .b.v').length,
    lanes: q('.lanes div:not(.gl)').map(d => d.textContent),
    keyRows: q('table.keys tr').length - q('table.keys').length,
    violations: q('tr.violation').map(tr => tr.textContent.replace(/\s+/g, ' ')),
    summaryFail: q('table.summary td.v.fail').length,
    resources: performance.getEntriesByType('resource').length,
  };
  const v = document.querySelector('.tl .b.v');
  if (v) {
    v.click();
    const pin = document.getElementById('pin');
    r.pinned = pin.hidden ? '' : pin.textContent;
    r.highlighted = q('.tl .b.hl').length;
    document.body.click();
  }
  return r;
})()`

// TestReportInChromium runs the race scenario against SQLite's
// select-then-insert mutant, writes the results directory with its HTML
// report, opens the report in headless Chromium and checks from the DOM
// that the timeline, the key table and the violations rendered; it saves a
// screenshot of the page and one of the timeline.
func TestReportInChromium(t *testing.T) {
	bin := findChromium(t)
	sum := htmlreport.FailingRun(t, "sqlite", "select-then-insert")
	dir := writeResults(t, sum)
	sc := sum.Scenarios[0]
	wantBoxes := len(sc.History().Ops()) + len(sc.History().Work())
	keys := map[string]bool{}
	for _, op := range sc.History().Ops() {
		if op.Input.Key.Key != "" {
			keys[op.Input.Key.String()] = true
		}
	}

	ctx := browsertest.Open(t, bin, 1400, 2100, 90*time.Second)

	start := time.Now()
	url := "file://" + filepath.Join(dir, htmlreport.FileName)
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
		t.Fatalf("open %s in %s: %v", url, bin, err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[domReport](readDOM))
	if err != nil {
		t.Fatalf("read the report's DOM: %v", err)
	}
	t.Logf("Chromium: %d boxes (%d laid out, %d on violated keys), lanes %v, %d key rows, %d violation rows, opened in %v",
		got.Boxes, got.VisibleBoxes, got.ViolatedBox, got.Lanes, got.KeyRows, len(got.Violations), time.Since(start).Round(time.Millisecond))

	if !strings.Contains(got.Header, "FAIL") || !strings.Contains(got.Header, "select-then-insert") {
		t.Errorf("header %q does not say FAIL on select-then-insert", got.Header)
	}
	if got.Boxes == 0 || got.Boxes != wantBoxes {
		t.Errorf("timeline has %d boxes, want one per store call and work run: %d", got.Boxes, wantBoxes)
	}
	if got.VisibleBoxes != got.Boxes {
		t.Errorf("only %d of %d timeline boxes are laid out with a size", got.VisibleBoxes, got.Boxes)
	}
	if got.ViolatedBox == 0 {
		t.Errorf("no timeline box is marked as on a violated key")
	}
	if want := sc.Clients; len(got.Lanes) != want {
		t.Errorf("timeline has lanes %v, want one per client: %d", got.Lanes, want)
	}
	if got.KeyRows != len(keys) {
		t.Errorf("key table has %d rows, want one per key: %d", got.KeyRows, len(keys))
	}
	if got.SummaryFail == 0 {
		t.Errorf("the summary table shows no failing checker")
	}
	if got.Resources != 0 {
		t.Errorf("the report fetched %d resources: it must be self-contained", got.Resources)
	}
	for _, v := range sum.Violations {
		found := false
		for _, row := range got.Violations {
			if strings.Contains(row, v.Checker) && strings.Contains(row, v.Key) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no violation row names checker %s and key %s", v.Checker, v.Key)
		}
	}
	if !strings.Contains(got.Pinned, "client ") || !strings.Contains(got.Pinned, "called at") {
		t.Errorf("clicking a box pinned %q, want its full description", got.Pinned)
	}
	if got.Highlighted < 2 {
		t.Errorf("clicking a box highlighted %d boxes, want all the boxes of its key", got.Highlighted)
	}

	page, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.ScrollIntoView(chromedp.CSS(".tlwrap"))); err != nil {
		t.Fatalf("scroll to the timeline: %v", err)
	}
	tl, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(".tlwrap")))
	if err != nil {
		t.Fatalf("screenshot of the timeline: %v", err)
	}
	saveScreenshot(t, "report.png", page)
	saveScreenshot(t, "timeline.png", tl)
}

func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("%s: not a PNG (%d bytes)", name, len(png))
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv(EnvScreenshotDir); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("%s=%s: %v", EnvScreenshotDir, d, err)
		}
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatalf("save screenshot: %v", err)
		}
		t.Logf("screenshot %s (%d bytes)", p, len(png))
	}
}

// writeResults writes the run's results directory as `idemcheck check`
// does, the HTML report included, and returns its path.
func writeResults(t *testing.T, sum *results.Summary) string {
	t.Helper()
	dir, err := report.PrepareRunDir(t.TempDir(), sum.Store, sum.Variant, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.Write(sum); err != nil {
		t.Fatal(err)
	}
	if err := htmlreport.Write(dir.Path, sum); err != nil {
		t.Fatal(err)
	}
	return dir.Path
}
