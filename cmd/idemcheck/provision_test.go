package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
)

// TestEarlyServers: servers started ahead of a run are handed out (an
// error included) until none is left, and those never taken are closed
// by close, once up; none is closed twice or left running.
func TestEarlyServers(t *testing.T) {
	var started, closed atomic.Int32
	start := func(context.Context) (*harness.OwnedServer, error) {
		if started.Add(1) == 2 {
			return nil, errors.New("no room")
		}
		return &harness.OwnedServer{Close: func() { closed.Add(1) }}, nil
	}
	e := startAhead(context.Background(), 3, start)
	var errs, servers int
	for range 2 {
		s, err, ok := e.take()
		if !ok {
			t.Fatal("take: none left of 3")
		}
		if err != nil {
			errs++
		} else {
			servers++
			defer s.Close()
		}
	}
	e.close()
	if _, _, ok := e.take(); ok {
		t.Fatal("take after close gave a server")
	}
	e.close()
	if started.Load() != 3 || closed.Load() != int32(errs) {
		t.Fatalf("started %d, closed %d before the taken ones; want 3 and %d (errors taken)", started.Load(), closed.Load(), errs)
	}
	if errs+servers != 2 {
		t.Fatalf("took %d errors and %d servers", errs, servers)
	}
	if none := startAhead(context.Background(), 0, start); func() bool { _, _, ok := none.take(); return ok }() {
		t.Fatal("take from none started gave a server")
	}
}

// TestInBackground: a server of its own is removed in the background:
// its Close returns while the removal still runs, a second Close starts
// no second removal, and the wait ends only once the removal has.
func TestInBackground(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	var removals, done atomic.Int32
	closeSrv := inBackground(&wg, func() {
		removals.Add(1)
		<-release
		done.Add(1)
	})
	closeSrv() // returns although the removal is blocked
	closeSrv()
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("the wait ended before the removal did")
	default:
	}
	close(release)
	<-waited
	if removals.Load() != 1 || done.Load() != 1 {
		t.Fatalf("%d removals started, %d ended; want one of each", removals.Load(), done.Load())
	}
}
