package loopback

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePort: the ports it gives can be listened on at once, differ
// from one call to the next, and lie outside the kernel's ephemeral
// range where the range leaves room below it.
func TestFreePort(t *testing.T) {
	lo, hi := block()
	seen := map[int]bool{}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p <= 0 || p > 65535 {
			t.Fatalf("port %d", p)
		}
		if lo != 0 && (p < lo || p > hi) {
			t.Fatalf("port %d outside %d-%d, below the ephemeral range", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("listen on the free port %d: %v", p, err)
		}
		ln.Close()
	}
}

// TestPickInSkipsTakenPorts: a port something listens on is not given,
// nor one handed out lately; when every draw is one of those, it fails.
func TestPickInSkipsTakenPorts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	free, err := kernelPort()
	if err != nil {
		t.Fatal(err)
	}
	// Draws: the taken port, then the free one, over and over.
	n := 0
	draw := func(int) int {
		n++
		if n%2 == 1 {
			return busy - 1
		}
		return free - 1
	}
	p, err := pickIn(1, 65535, draw)
	if err != nil {
		t.Fatal(err)
	}
	if p != free {
		t.Fatalf("picked %d, want %d (the taken port %d skipped)", p, free, busy)
	}
	// The free port was handed out; the taken one is still taken.
	if p, err := pickIn(1, 65535, draw); err == nil {
		t.Fatalf("picked %d though every draw was taken or handed out lately", p)
	}
}
