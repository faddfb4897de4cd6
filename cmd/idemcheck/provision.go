package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// What a run needs besides its store's code: the place its data lives
// and the fault tools that go with it, made before the run and removed
// after it.

// provision finds where the backend's data lives (a temporary directory
// for SQLite files, a server for Postgres and Redis) and the fault tools
// that go with it: network proxies in front of a server, pause and restart
// of a server this run started, worker processes of this program. It sets
// them in o; cleanup removes what it made, containers included. ahead
// servers for the server-fault scenarios (harness.Options.OwnServersAhead)
// start beside the run's own, when it starts containers: a run's own
// servers then wait for none of them.
func provision(ctx context.Context, o *harness.Options, stderr io.Writer, ahead int) (cleanup func(), err error) {
	o.WorkerCommand = workerCommand()
	switch o.Backend.Lives {
	case stores.InProcess:
		return func() {}, nil
	case stores.File:
		dir, release, err := makeSQLiteDir(stderr)
		if err != nil {
			return nil, err
		}
		o.Addr = dir
		return release, nil
	}
	if o.Backend.Replicated != "" {
		return provisionReplicated(ctx, o, stderr)
	}
	kind := serverKind(o.Backend.Name)
	start := func(ctx context.Context) (*harness.OwnedServer, error) {
		s, _, err := startServer(ctx, kind, stderr)
		if err == nil && s.Server == nil {
			s.Close()
			err = fmt.Errorf("the second %s server cannot be faulted", o.Backend.Name)
		}
		return s, err
	}
	if servers.Named(servers.Kind(kind)) {
		ahead = 0
	}
	early := startAhead(ctx, ahead, start)
	own, noFaults, err := startServer(ctx, kind, stderr)
	if err != nil {
		early.close()
		return nil, err
	}
	o.Addr, o.Net, o.Server, o.NoServer = own.Addr, own.Net, own.Server, noFaults
	if own.Server == nil {
		early.close()
		return own.Close, nil
	}
	// The server-fault scenarios get a container of their own (see
	// harness.Options.OwnServer), those started ahead first. Each is
	// removed in the background once its scenario is done, so that the
	// run's end does not wait for it (a container's removal takes a
	// fifth of a second or more); cleanup waits for every removal.
	var removing sync.WaitGroup
	o.OwnServer = func(ctx context.Context) (*harness.OwnedServer, error) {
		s, err, ok := early.take()
		if !ok {
			s, err = start(ctx)
		}
		if s != nil {
			s.Close = inBackground(&removing, s.Close)
		}
		return s, err
	}
	return func() { early.close(); own.Close(); removing.Wait() }, nil
}

// inBackground makes close return at once and run in the background,
// counted in wg; a second call does nothing.
func inBackground(wg *sync.WaitGroup, close func()) func() {
	var once sync.Once
	return func() { once.Do(func() { wg.Go(close) }) }
}

// earlyServers are servers started ahead of a run, beside its own
// (provision): take hands them out in the order they come up, and close
// removes those never taken, once they are up.
type earlyServers struct {
	mu      sync.Mutex
	pending int // started and not yet taken
	ready   chan earlyServer
}

type earlyServer struct {
	s   *harness.OwnedServer
	err error
}

// startAhead starts n servers at once with start, on ctx.
func startAhead(ctx context.Context, n int, start func(context.Context) (*harness.OwnedServer, error)) *earlyServers {
	e := &earlyServers{pending: n, ready: make(chan earlyServer, n)}
	for range n {
		go func() {
			s, err := start(ctx)
			e.ready <- earlyServer{s, err}
		}()
	}
	return e
}

// take gives a server started ahead, waiting for it to be up (or for its
// error); ok is false when none is left.
func (e *earlyServers) take() (s *harness.OwnedServer, err error, ok bool) {
	e.mu.Lock()
	if e.pending == 0 {
		e.mu.Unlock()
		return nil, nil, false
	}
	e.pending--
	e.mu.Unlock()
	r := <-e.ready
	return r.s, r.err, true
}

// close removes the servers never taken.
func (e *earlyServers) close() {
	e.mu.Lock()
	n := e.pending
	e.pending = 0
	e.mu.Unlock()
	for range n {
		if r := <-e.ready; r.s != nil {
			r.s.Close()
		}
	}
}

// startServer starts a server for backend (a container, or the one the
// environment names) with its network proxies and, when it can be
// faulted, its pause and restart (Server); noFaults says why it cannot.
// Close removes what it started.
func startServer(ctx context.Context, backend string, stderr io.Writer) (s *harness.OwnedServer, noFaults string, err error) {
	srv, err := servers.Start(ctx, servers.Kind(backend), servers.Options{
		Notef: func(format string, args ...any) { fmt.Fprintf(stderr, "idemcheck: "+format+"\n", args...) }})
	if err != nil {
		return nil, "", err
	}
	closeSrv := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			fmt.Fprintf(stderr, "idemcheck: %v\n", err)
		}
	}
	s = &harness.OwnedServer{Addr: srv.Addr, Net: servers.Network(backend), Close: closeSrv}
	if why := srv.NoFaults(); why != "" {
		return s, why, nil
	}
	f, err := servers.NewFaults(srv)
	if err != nil {
		closeSrv()
		return nil, "", err
	}
	s.Server = f
	s.Close = func() { f.Close(); closeSrv() }
	return s, "", nil
}

// provisionReplicated starts the replicated topology of a replicated
// backend (a primary, a standby, the router in front of the primary) and
// gives the run its address, its failover and partition faults, and a
// network proxy in front of the router. The server faults of one server
// (store-faults) do not apply: the topology's are failover and partition.
func provisionReplicated(ctx context.Context, o *harness.Options, stderr io.Writer) (cleanup func(), err error) {
	kind := servers.Kind(o.Backend.Replicated)
	top, err := servers.StartReplicated(ctx, kind, servers.Options{
		Notef: func(format string, args ...any) { fmt.Fprintf(stderr, "idemcheck: "+format+"\n", args...) }})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "idemcheck: %s: primary and standby started and streaming in %.1fs\n", top, top.Started.Seconds())
	o.Addr, o.Cluster, o.Net = top.Addr, top, servers.Network(string(kind))
	o.NoServer = fmt.Sprintf("the %s store is replicated: its server faults are the failover and partition scenarios", o.Backend.Name)
	return func() {
		if err := top.Close(); err != nil {
			fmt.Fprintf(stderr, "idemcheck: %v\n", err)
		}
	}, nil
}
