package netfault

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallBacklog listens on 127.0.0.1 with a listen backlog of 1, which Go's
// net.Listen does not offer: a full accept queue drops the next SYN, and
// its dial waits for the kernel's retransmit (about 1 s).
func smallBacklog(t *testing.T) net.Listener {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("raw socket: %v", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestADialThatWaitsHoldsNoOneElse: a client whose connection the proxy
// cannot yet open upstream (the upstream's accept queue is full) does not
// hold the next client waiting. toxiproxy dials the upstream inside its
// accept loop, one connection at a time: a Python service (listen
// backlog 5) under a retry storm through the proxy stopped answering
// anything through it while it answered at once directly, and idemcheck
// http failed a correct service on liveness. Through the relay, the
// second client's dial of the upstream starts while the first's still
// waits; once the queue is freed, both are answered.
//
// The queue stays full until both dials are seen waiting, so no timing
// decides the outcome. An earlier form freed it after the first dial's
// SYN retransmit and wanted the second client answered before the
// first's next one: that is 1 s, not 2 s, where the kernel retransmits
// SYNs at a linear 1 s (net.ipv4.tcp_syn_linear_timeouts, Linux 6.5 on),
// and a CI run's second client took longer.
func TestADialThatWaitsHoldsNoOneElse(t *testing.T) {
	up := smallBacklog(t)
	port := up.Addr().(*net.TCPAddr).Port
	// Fill the upstream's accept queue with connections of our own.
	var fill []net.Conn
	for len(fill) < 2 {
		c, err := net.DialTimeout("tcp", up.Addr().String(), 200*time.Millisecond)
		if err != nil {
			break
		}
		fill = append(fill, c)
	}
	p, err := Start("backlog", up.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	answered := make(chan string, 2)
	// ask connects to the proxy and sends a request (connected here, not
	// left to an HTTP client in a goroutine, so that its dial is known to
	// be under way), and reads the answer in a goroutine.
	ask := func(name string) net.Conn {
		c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("GET /" + name + " HTTP/1.1\r\nHost: backlog\r\nConnection: close\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
				answered <- name + ": " + err.Error()
				return
			}
			answered <- name
		}()
		return c
	}
	// waitDials waits until n dials of the upstream are in SYN_SENT: their
	// SYNs met the full queue and wait for a retransmit.
	waitDials := func(n int, what string) {
		t.Helper()
		for deadline := time.Now().Add(8 * time.Second); synSent(t, port) < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d dials of the upstream wait, want %d", what, synSent(t, port), n)
			}
		}
	}
	first := ask("first")
	defer first.Close()
	waitDials(1, "the first client's dial never met the full queue")
	second := ask("second")
	defer second.Close()
	// The relay's dial timeout is 10 s: the first's dial still waits
	// within these 8 s, and a proxy that dials one connection at a time
	// has not begun the second's.
	waitDials(2, "the second client's dial waits behind the first's")
	// Free the queue and serve: each waiting dial lands at its next
	// retransmit.
	for _, c := range fill {
		c.Close()
	}
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
				}
			}()
		}
	}()
	got := map[string]bool{}
	for range 2 {
		a := <-answered
		if a != "first" && a != "second" {
			t.Errorf("a client was not answered: %s", a)
		}
		got[a] = true
	}
	if !got["first"] || !got["second"] {
		t.Errorf("answered: %v, want both clients", got)
	}
}

// synSent is how many TCP sockets of this machine are in SYN_SENT to a
// peer on port: dials whose SYN met a full accept queue and wait for a
// retransmit (the states in /proc/net/tcp are hexadecimal, SYN_SENT is
// 02; the remote address is address:port in hexadecimal).
func synSent(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf(":%04X", port)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[2], suffix) && f[3] == "02" {
			n++
		}
	}
	return n
}
