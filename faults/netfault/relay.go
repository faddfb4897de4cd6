package netfault

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// relay is a proxy's way to its upstream. toxiproxy dials the upstream
// inside its accept loop, one connection at a time and with no timeout,
// so one slow dial holds every later client of the proxy waiting. An
// upstream whose listen backlog is full makes each dial wait for the
// kernel's SYN retransmits (a second or more apart): Python's http.server
// listens with a backlog of 5, and under a retry storm through the proxy
// (clients timing out faster than the service answers) the proxy stopped
// passing anything, while the service answered at once when called
// directly. The relay listens beside the proxy, with Go's backlog, so
// toxiproxy's dial always lands at once, and dials the real upstream for
// each connection in a goroutine of its own. It closes both sides when
// either ends, as toxiproxy's links do, and passes a reset on as a reset.
type relay struct {
	ln       net.Listener
	upstream string
	ctx      context.Context // ended by close: it ends the dials in progress
	cancel   context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// relayDialTimeout bounds one dial of the real upstream: past it the
// connection is closed, as a refused one is.
const relayDialTimeout = 10 * time.Second

// startRelay listens on 127.0.0.1 at a free port and forwards every
// connection to upstream.
func startRelay(upstream string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is where toxiproxy dials instead of the upstream.
func (r *relay) Addr() string { return r.ln.Addr().String() }

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(c) {
			_ = c.Close()
			return
		}
		r.wg.Add(1)
		go r.pipe(c)
	}
}

// track records c, so that close can close it (false once closed).
func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

// pipe dials the upstream for c and copies both ways until either side
// ends.
func (r *relay) pipe(c net.Conn) {
	defer r.wg.Done()
	defer r.untrack(c)
	defer c.Close()
	u, err := (&net.Dialer{Timeout: relayDialTimeout}).DialContext(r.ctx, "tcp", r.upstream)
	if err != nil {
		return
	}
	if !r.track(u) {
		_ = u.Close()
		return
	}
	defer r.untrack(u)
	// Either side ending closes the other (forward), as toxiproxy's
	// links do, and so ends the other direction's copy.
	done := make(chan struct{})
	go func() { forward(u, c); close(done) }()
	forward(c, u)
	<-done
}

// forward copies from src to dst until src ends, then closes dst. A
// reset of src is passed on: dst is closed with a reset too.
func forward(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if errors.Is(err, syscall.ECONNRESET) {
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	_ = dst.Close()
}

// close stops listening, closes every connection and waits for the
// relay's goroutines.
func (r *relay) close() {
	r.cancel()
	r.mu.Lock()
	r.closed = true
	conns := make([]net.Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	_ = r.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	r.wg.Wait()
}
