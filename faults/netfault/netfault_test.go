package netfault

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineServer answers each line with "ok <line>" and remembers the lines it
// received, so a test can tell a lost request from a lost reply.
type lineServer struct {
	ln   net.Listener
	mu   sync.Mutex
	seen []string
}

func startLineServer(t *testing.T) *lineServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lineServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					line = strings.TrimSpace(line)
					s.mu.Lock()
					s.seen = append(s.seen, line)
					s.mu.Unlock()
					if _, err := c.Write([]byte("ok " + line + "\n")); err != nil {
						return
					}
				}
			}(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *lineServer) received(line string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.seen {
		if l == line {
			return true
		}
	}
	return false
}

// call sends one line on a fresh connection and waits for the reply.
func call(addr, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(reply), err
}

// TestFaultsOnTCP: each fault does what it says to plain TCP traffic, and
// the proxy counts what it hit.
func TestFaultsOnTCP(t *testing.T) {
	srv := startLineServer(t)
	p, err := Start("tcp", srv.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") || p.Addr() == srv.ln.Addr().String() {
		t.Fatalf("proxy address %q: want its own port on 127.0.0.1", p.Addr())
	}

	if got, err := call(p.Addr(), "a"); err != nil || got != "ok a" {
		t.Fatalf("healthy proxy: got %q, %v", got, err)
	}
	if len(p.Hits()) != 0 {
		t.Fatalf("healthy traffic counted as faults: %v", p.Hits())
	}

	// Lost reply: the server gets the request, the client gets no reply.
	if err := p.LoseReplies(); err != nil {
		t.Fatal(err)
	}
	if got, err := call(p.Addr(), "b"); err == nil {
		t.Fatalf("lost reply: the client got %q", got)
	}
	if !srv.received("b") {
		t.Error("lost reply: the request never reached the server")
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}

	// One lost reply: the next call loses its reply, the one after passes.
	if err := p.LoseNextReply(); err != nil {
		t.Fatal(err)
	}
	if got := p.Active(); len(got) != 1 || got[0] != KindLostReply {
		t.Errorf("active faults %v, want [lost-reply]", got)
	}
	if got, err := call(p.Addr(), "b2"); err == nil {
		t.Fatalf("lost next reply: the client got %q", got)
	}
	if !srv.received("b2") {
		t.Error("lost next reply: the request never reached the server")
	}
	if got, err := call(p.Addr(), "b3"); err != nil || got != "ok b3" {
		t.Fatalf("the reply after the lost one: got %q, %v", got, err)
	}
	if len(p.Active()) != 0 {
		t.Errorf("faults still on after the one lost reply: %v", p.Active())
	}

	// Reset: the request is dropped before the server, the client gets an error.
	if err := p.ResetConnections(); err != nil {
		t.Fatal(err)
	}
	if got, err := call(p.Addr(), "c"); err == nil {
		t.Fatalf("reset: the client got %q", got)
	}
	time.Sleep(50 * time.Millisecond)
	if srv.received("c") {
		t.Error("reset: the request reached the server")
	}
	if got := p.Active(); len(got) != 1 || got[0] != KindReset {
		t.Errorf("active faults %v, want [reset]", got)
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	if len(p.Active()) != 0 {
		t.Errorf("faults still on after Heal: %v", p.Active())
	}

	// Latency: the reply comes, late.
	if err := p.Latency(200*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got, err := call(p.Addr(), "d"); err != nil || got != "ok d" {
		t.Fatalf("latency: got %q, %v", got, err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Errorf("latency 200ms: the call took %v", el)
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}

	// Healed: back to normal, and the counts are what was hit.
	if got, err := call(p.Addr(), "e"); err != nil || got != "ok e" {
		t.Fatalf("after Heal: got %q, %v", got, err)
	}
	want := map[string]int{KindLostReply: 2, KindReset: 1, KindLatency: 1}
	got := p.Hits()
	for k, n := range want {
		if got[k] != n {
			t.Errorf("hits %v, want %v", got, want)
			break
		}
	}
	if sw := p.Switches(); sw[KindLostReply] != 2 || sw[KindReset] != 1 || sw[KindLatency] != 1 {
		t.Errorf("switches %v, want 2 lost-reply, 1 of the others", sw)
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := call(p.Addr(), "f"); err == nil {
		t.Error("a closed proxy still forwards")
	}
	if err := p.LoseReplies(); err != ErrClosed {
		t.Errorf("LoseReplies after Close: %v, want ErrClosed", err)
	}
}

func TestLatencyValidation(t *testing.T) {
	srv := startLineServer(t)
	p, err := Start("v", srv.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Latency(-time.Millisecond, 0); err == nil {
		t.Error("negative latency accepted")
	}
	if err := p.Latency(time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Latency(0, 0); err != nil || len(p.Active()) != 0 {
		t.Errorf("Latency(0, 0) should switch latency off: %v, active %v", err, p.Active())
	}
	if _, err := Start("bad", "no-port"); err == nil {
		t.Error("Start accepted an upstream without a port")
	}
}

func TestRewriteDSN(t *testing.T) {
	cases := []struct{ dsn, want string }{
		{"postgres://u:p%40ss@db.example:5433/app?sslmode=disable", "postgres://u:p%40ss@127.0.0.1:9999/app?sslmode=disable"},
		{"postgresql://u@db/app", "postgresql://u@127.0.0.1:9999/app"},
		{"postgres://u@/app?host=db&port=5433&sslmode=disable", "postgres://u@127.0.0.1:9999/app?sslmode=disable"},
		{"host=db port=5433 user=u password='a b\\'c' dbname=app", "user=u password='a b\\'c' dbname=app host=127.0.0.1 port=9999"},
		{"user=u dbname=app host = db", "user=u dbname=app host=127.0.0.1 port=9999"},
	}
	for _, c := range cases {
		got, err := RewriteDSN(c.dsn, "127.0.0.1:9999")
		if err != nil || got != c.want {
			t.Errorf("RewriteDSN(%q) = %q, %v; want %q", c.dsn, got, err, c.want)
		}
	}
	if up, err := PostgresUpstream("host=db port=5433 user=u"); err != nil || up != "db:5433" {
		t.Errorf("PostgresUpstream = %q, %v", up, err)
	}
	for _, bad := range []string{"host=/var/run/postgresql user=u", "postgres://u@h1:5432,h2:5432/app", "host='unterminated"} {
		if got, err := RewriteDSN(bad, "127.0.0.1:9999"); err == nil {
			t.Errorf("RewriteDSN(%q) = %q, want an error", bad, got)
		}
	}
	if got, err := RewriteRedisAddr("redis://:pw@cache:6380/2?pool_size=1", "127.0.0.1:9999"); err != nil || got != "redis://:pw@127.0.0.1:9999/2?pool_size=1" {
		t.Errorf("RewriteRedisAddr(URL) = %q, %v", got, err)
	}
	if up, err := RedisUpstream("redis://cache"); err != nil || up != "cache:6379" {
		t.Errorf("RedisUpstream(redis://cache) = %q, %v", up, err)
	}
	if _, err := RedisUpstream("cache"); err == nil {
		t.Error("RedisUpstream accepted an address without a port")
	}
	if _, _, err := StartFor("x", "sqlite", "/tmp/x.db"); err == nil {
		t.Error("StartFor accepted sqlite")
	}
}
