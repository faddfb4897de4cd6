package main

import (
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHTTPOverTLS: a service reachable only over TLS is tested through
// its https:// URL, its certificate trusted by --cacert, or by
// --insecure; untrusted, the run stops at once, in one line naming both.
func TestHTTPOverTLS(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	provPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ts := httptest.NewUnstartedServer(&testService{mode: "tls", provider: fmt.Sprintf("http://127.0.0.1:%d/charge", provPort), recs: map[string]*testRec{}})
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes of the untrusted run
	ts.StartTLS()
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		out := t.TempDir()
		code, _, stderr := runCLI(t, append([]string{"http", "--target", ts.URL + "/orders", "--provider-port", strconv.Itoa(provPort),
			"--duration", "2s", "--settle", "3s", "--clients", "4", "--seed", "3", "--out", out}, args...)...)
		report, _ := os.ReadFile(filepath.Join(out, "report.txt"))
		return code, string(report), stderr
	}
	for _, trust := range [][]string{{"--cacert", ca}, {"--insecure"}} {
		code, report, stderr := run(trust...)
		if code != exitPass || !strings.Contains(report, "PASS at-most-once     (applied)") || !strings.Contains(report, "declared TLS: ") {
			t.Errorf("%v: exit %d, stderr %q, report:\n%s", trust, code, stderr, report)
		}
	}
	code, _, stderr := run()
	if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "certificate is not trusted") ||
		!strings.Contains(stderr, "--cacert") || !strings.Contains(stderr, "--insecure") {
		t.Errorf("an untrusted certificate: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "http", "--target", "http://127.0.0.1:1/orders", "--insecure")
	if code != exitUsage || !strings.Contains(stderr, "for https:// targets") {
		t.Errorf("--insecure without an https target: exit %d, stderr %q", code, stderr)
	}
}
