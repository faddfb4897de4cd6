package netfault

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
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
// client that came second is answered first.
func TestADialThatWaitsHoldsNoOneElse(t *testing.T) {
	up := smallBacklog(t)
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
	get := func(name string) {
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + p.Addr() + "/" + name)
		if err != nil {
			answered <- name + ": " + err.Error()
			return
		}
		resp.Body.Close()
		answered <- name
	}
	// The first client is connected to the proxy, its request sent, before
	// the queue is freed (a goroutine's HTTP client, left to connect on its
	// own, came late on a loaded machine and found the queue free): the
	// proxy's dial for it meets the full queue, and waits for a retransmit
	// (a second or more).
	first, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := first.Write([]byte("GET /first HTTP/1.1\r\nHost: backlog\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := http.ReadResponse(bufio.NewReader(first), nil); err != nil {
			answered <- "first: " + err.Error()
			return
		}
		answered <- "first"
	}()
	// The proxy's dial for it is sent: its link has reached the relay,
	// whose dial of the upstream follows at once (a fixed 200 ms here was
	// too short once under make test's load).
	for deadline := time.Now().Add(5 * time.Second); p.relay.tracked() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first client's connection never reached the relay")
		}
	}
	// And its SYN has been sent, met the full queue, and been sent again
	// once: a socket of this machine in SYN_SENT to the upstream's port,
	// with a retransmit (a fixed 50 ms for the relay's dial to start was
	// too short once under make test's load: the dial came after the
	// queue was freed, and landed at once). Its next retransmit is then
	// 2 s away (the kernel doubles the wait from 1 s), which is the time
	// the second client has to be answered first; freed before the first
	// retransmit, that was under 1 s, and a CI rehearsal's second client
	// took longer.
	for deadline := time.Now().Add(10 * time.Second); synSentTo(t, up.Addr().(*net.TCPAddr).Port) < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the relay's dial of the upstream never sent its SYN again")
		}
	}
	// Free the queue and serve: from now on a dial lands at once.
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
	go get("second")
	if got := <-answered; got != "second" {
		t.Errorf("answered first: %q; want the second client, whose dial could land at once, not held behind the first's", got)
	}
	if got := <-answered; got != "first" {
		t.Errorf("then: %q, want first", got)
	}
}

// synSentTo is how many times a TCP socket of this machine in SYN_SENT
// to a peer on port has sent its SYN again, or -1 if there is none: a
// dial whose SYN met a full accept queue and waits for its retransmit
// (the states in /proc/net/tcp are hexadecimal, SYN_SENT is 02; the
// remote address is address:port in hexadecimal; the seventh field
// counts the retransmits, in hexadecimal).
func synSentTo(t *testing.T, port int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf(":%04X", port)
	n := -1
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 6 && strings.HasSuffix(f[2], suffix) && f[3] == "02" {
			r, err := strconv.ParseInt(f[6], 16, 64)
			if err != nil {
				t.Fatalf("/proc/net/tcp: retransmits %q: %v", f[6], err)
			}
			n = max(n, int(r))
		}
	}
	return n
}

// tracked is how many connections r holds (a link from the proxy counts
// from its accept, before its dial of the upstream).
func (r *relay) tracked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}
