package servers

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Router is the harness's TCP forwarder in front of a replicated
// topology: stores connect to its address, and it forwards each
// connection to the current primary. Route points it at another server
// (a promoted standby) and drops every connection it forwards, as a
// client library's failover does: calls in flight end without an answer,
// and the store dials again, now to the new primary.
type Router struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// routerDialTimeout bounds a dial to the primary: a primary cut off from
// the clients does not answer, and the store's call then fails.
const routerDialTimeout = time.Second

// NewRouter listens on a free loopback port and forwards to target.
func NewRouter(target string) (*Router, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Router{ln: ln, target: target, conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the router's host:port.
func (r *Router) Addr() string { return r.ln.Addr().String() }

// Target is the server the router forwards to now.
func (r *Router) Target() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target
}

// Route forwards new connections to target and drops every connection
// forwarded so far.
func (r *Router) Route(target string) {
	r.mu.Lock()
	r.target = target
	old := r.conns
	r.conns = map[net.Conn]bool{}
	r.mu.Unlock()
	for c := range old {
		_ = c.Close()
	}
}

// Close stops listening and drops every connection.
func (r *Router) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	err := r.ln.Close()
	r.Route("")
	r.wg.Wait()
	return err
}

func (r *Router) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go r.forward(c)
	}
}

// track records c as forwarded (false if the router is closed).
func (r *Router) track(c ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	for _, x := range c {
		r.conns[x] = true
	}
	return true
}

func (r *Router) forward(c net.Conn) {
	target := r.Target()
	if target == "" {
		_ = c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", target, routerDialTimeout)
	if err != nil {
		_ = c.Close()
		return
	}
	if !r.track(c, up) {
		_ = c.Close()
		_ = up.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	r.mu.Lock()
	delete(r.conns, c)
	delete(r.conns, up)
	r.mu.Unlock()
}
