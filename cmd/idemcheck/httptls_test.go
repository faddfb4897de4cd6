package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/internal/loopback"
)

// TestHTTPOverTLS: a service reachable only over TLS is tested through
// its https:// URL, its certificate trusted by --cacert, or by
// --insecure; untrusted, the run stops at once, in one line naming both.
func TestHTTPOverTLS(t *testing.T) {
	t.Parallel()
	// The provider's port is bound and let go by each of the runs below:
	// one the kernel handed out (":0") was handed to another test's
	// connection in between when the tests ran in parallel.
	provPort, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
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

// TestHTTPStartsTLSInstances: instances started with --cmd that speak
// only TLS (--scheme https) are made ready and tested over it, their
// certificate trusted by --cacert; untrusted, the run stops at once (not
// after --start-timeout), in one line.
func TestHTTPStartsTLSInstances(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	env := []string{"IDEM_TEST_CERT=" + cert, "IDEM_TEST_KEY=" + key}
	code, _, report := blackbox(t, "strict", env, "--scheme", "https", "--cacert", cert, "-H", "Authorization: Bearer s3cret",
		"--body-type", "form", "--order-at", "ref", "--amount-at", "cents", "--process-faults=false")
	// (The strict service keeps its records in memory: no kill, or it
	// forgets them.)
	if code != exitPass || !strings.Contains(report, "declared TLS: certificates verified against") ||
		!strings.Contains(report, "PASS at-most-once     (applied)") {
		t.Fatalf("exit %d, report:\n%s", code, report)
	}
	start := time.Now()
	code, _, stderr := runCLI(t, "http", "--cmd", serviceCmd(t, "strict", env...), "--instances", "1", "--scheme", "https", "--duration", "1s", "--out", t.TempDir())
	if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "certificate is not trusted") || time.Since(start) > 30*time.Second {
		t.Errorf("an untrusted instance: exit %d after %v, stderr %q", code, time.Since(start), stderr)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idemcheck test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
