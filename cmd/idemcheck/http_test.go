package main

import (
	"net"
	"strings"
	"testing"
)

// TestHTTPBadTarget: a refused port and a server that does not speak HTTP
// each give one line on stderr and exit 2, before any traffic.
func TestHTTPBadTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()

	notHTTP, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer notHTTP.Close()
	go func() {
		for {
			c, err := notHTTP.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_, _ = c.Read(buf)
			_, _ = c.Write([]byte("+PONG\r\n"))
			c.Close()
		}
	}()

	for _, tc := range []struct{ url, want string }{
		{"http://" + refused + "/orders", "connection refused"},
		{"http://" + notHTTP.Addr().String() + "/orders", "not an HTTP server"},
		{"ftp://" + refused, "want an http:// URL"},
	} {
		code, stdout, stderr := runCLI(t, "http", "--target", tc.url, "--out", t.TempDir())
		if code != exitUsage {
			t.Errorf("%s: exit %d, want 2 (stdout %q)", tc.url, code, stdout)
		}
		if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: stderr %q: want one line saying %q", tc.url, stderr, tc.want)
		}
	}
}
