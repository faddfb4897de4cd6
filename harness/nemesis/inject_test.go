package nemesis_test

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// echoServer answers each line it reads with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestNetWindowHitSaysWhetherTrafficWasHit: through a real proxy, a
// latency window that no call passes through is kept on until its
// longest and says it hit nothing; one that a call passes through after
// its drawn length ends early and says it hit. Both are recorded as
// windows in the history.
func TestNetWindowHitSaysWhetherTrafficWasHit(t *testing.T) {
	p, err := netfault.Start("inject-test", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := history.New()
	ctx := context.Background()

	start := time.Now()
	hit, err := nemesis.NetWindowHit(ctx, h, p, nemesis.NetLatency, 10*time.Millisecond, 200*time.Millisecond, time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hit {
		t.Errorf("a window no traffic passed through says it hit")
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("a window that hit nothing ended after %v, before its longest (200ms)", took)
	}

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // past the drawn length
		if _, err := c.Write([]byte("ping\n")); err != nil {
			sent <- err
			return
		}
		_, err := bufio.NewReader(c).ReadString('\n')
		sent <- err
	}()
	hit, err = nemesis.NetWindowHit(ctx, h, p, nemesis.NetLatency, 10*time.Millisecond, time.Minute, time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !hit {
		t.Errorf("a window a call passed through says it hit nothing")
	}
	if err := <-sent; err != nil {
		t.Fatalf("the call through the proxy: %v", err)
	}
	if n := len(h.Faults()); n != 2 {
		t.Errorf("%d fault windows recorded, want 2", n)
	}
}
