// Package browsertest opens the pages idemcheck writes (the run report,
// the demo page) in headless Chromium for tests, which then read what the
// page shows from its DOM. Shared by every test that checks a page in a
// browser, so they find the browser and start it alike.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// EnvChromium names a Chromium or Chrome binary to use instead of the first
// of Names found on PATH.
const EnvChromium = "IDEM_CHROMIUM"

// Names are the browser binaries looked for on PATH, in order.
var Names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

// Find returns the browser binary, or skips the test with a reason, or
// fails it when required (IDEM_REQUIRE_SERVERS=1: CI must not skip it).
func Find(t testing.TB, required bool) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s=%s: %v", EnvChromium, p, err)
		}
		return p
	}
	for _, n := range Names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	msg := "no Chromium binary found (looked for " + strings.Join(Names, ", ") + " on PATH, and " + EnvChromium + "): apt-get install chromium"
	if required {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Open starts headless Chromium (bin, from Find) with a window of w x h
// pixels, for up to timeout, and returns its context; the browser is
// closed when the test ends. No sandbox: Chromium cannot sandbox as root
// or in most CI containers, and the pages are local files the test wrote.
func Open(t testing.TB, bin string, w, h int, timeout time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(w, h))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancel(); cancelAlloc() })
	return ctx
}
