package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePort: the port it gives can be listened on at once.
func TestFreePort(t *testing.T) {
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if p <= 0 || p > 65535 {
		t.Fatalf("port %d", p)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", p, err)
	}
	ln.Close()
}
