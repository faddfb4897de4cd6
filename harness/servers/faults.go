package servers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// Faults injects faults into the Postgres or Redis server behind a store:
// it freezes and thaws the server's container, kills it with SIGKILL and
// starts it again. The container keeps its data (its file system) and its
// host port across a restart (Start binds a fixed port), so stores
// reconnect to the same address by themselves: pgx's pool and go-redis
// drop a broken connection at its first error and dial anew. It works
// only for a server this process started (Server.Managed), and implements
// nemesis.Server for the harness's fault scenarios.
type Faults struct {
	srv *Server
	cli *client.Client
	id  string

	// op serialises the Docker calls: a pause still on its way (a slow
	// daemon on a loaded machine) and a kill must not cross. Kill and
	// Heal ask Docker what the container is (see state) rather than keep
	// their own idea of it, which a call that timed out would falsify.
	op sync.Mutex
}

var _ nemesis.Server = (*Faults)(nil)

// NewFaults connects to the Docker daemon that runs srv's container.
func NewFaults(srv *Server) (*Faults, error) {
	if why := srv.NoFaults(); why != "" {
		return nil, errors.New(why)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Faults{srv: srv, cli: cli, id: srv.Container().GetContainerID()}, nil
}

// NoFaults says why the server cannot be paused or restarted by this
// process (it comes from the environment, not a container this process
// started), or "" if it can.
func (s *Server) NoFaults() string {
	if s.Managed && s.Container() != nil {
		return ""
	}
	return fmt.Sprintf("the %s server comes from the environment (%s), not a container this run started: it cannot be paused or restarted", s.Kind, s.Source)
}

// Kind names the server's kind.
func (f *Faults) Kind() string { return string(f.srv.Kind) }

// Close closes the Docker client (the container stays as it is).
func (f *Faults) Close() error { return f.cli.Close() }

// Pause freezes the server: connections stay open, calls hang.
//
// The kernel's cgroup freezer gives up ("unable to freeze") when a process
// of the container does not stop in time, which a loaded machine makes
// likely; the freeze is then tried again, up to freezeTries times, each
// wait twice the last (from 100 ms, at most a second): five tries 100 ms
// apart still failed 4 of 180 soak seeds of Postgres at load 16, and a
// pause that starts a few seconds late is still the fault planned.
func (f *Faults) Pause(ctx context.Context) error {
	f.op.Lock()
	defer f.op.Unlock()
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		_, err := docker(ctx, "pause", func(ctx context.Context) (client.ContainerPauseResult, error) {
			return f.cli.ContainerPause(ctx, f.id, client.ContainerPauseOptions{})
		})
		if err == nil {
			break
		}
		if try == freezeTries || !strings.Contains(err.Error(), "unable to freeze") {
			return fmt.Errorf("pause %s (%d tries): %w", f.srv.Kind, try, err)
		}
		if err := faults.Pause(ctx, wait); err != nil {
			return fmt.Errorf("pause %s: %w", f.srv.Kind, err)
		}
		wait = min(2*wait, time.Second)
	}
	return nil
}

// freezeTries bounds Pause's attempts at freezing the container: with
// their waits, about eight seconds.
const freezeTries = 10

// Resume thaws a paused server; the calls it had received run now.
func (f *Faults) Resume(ctx context.Context) error {
	f.op.Lock()
	defer f.op.Unlock()
	return f.resume(ctx)
}

// resume is Resume with f.op held. A container that is not paused (a
// pause that failed, or one a kill already ended) is resumed already.
func (f *Faults) resume(ctx context.Context) error {
	if _, err := docker(ctx, "unpause", func(ctx context.Context) (client.ContainerUnpauseResult, error) {
		return f.cli.ContainerUnpause(ctx, f.id, client.ContainerUnpauseOptions{})
	}); err != nil {
		if st, ierr := f.state(ctx); ierr != nil || st.Paused {
			return fmt.Errorf("resume %s: %w", f.srv.Kind, err)
		}
	}
	return nil
}

// Kill kills the server with SIGKILL (no shutdown, no flush beyond what
// it had already made durable) and waits until its container has stopped.
func (f *Faults) Kill(ctx context.Context) error {
	f.op.Lock()
	defer f.op.Unlock()
	return f.kill(ctx)
}

// kill is Kill with f.op held.
func (f *Faults) kill(ctx context.Context) error {
	st, err := f.state(ctx)
	if err != nil {
		return fmt.Errorf("kill %s: inspect: %w", f.srv.Kind, err)
	}
	if st.Paused { // a frozen process cannot be killed until it is thawed
		if err := f.resume(ctx); err != nil {
			return err
		}
	}
	if _, err := docker(ctx, "kill", func(ctx context.Context) (client.ContainerKillResult, error) {
		return f.cli.ContainerKill(ctx, f.id, client.ContainerKillOptions{Signal: "KILL"})
	}); err != nil {
		return fmt.Errorf("kill %s: %w", f.srv.Kind, err)
	}
	for {
		st, err := f.state(ctx)
		if err != nil {
			return fmt.Errorf("kill %s: inspect: %w", f.srv.Kind, err)
		}
		if !st.Running {
			break
		}
		if err := faults.Pause(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("kill %s: still running: %w", f.srv.Kind, err)
		}
	}
	return nil
}

// Start starts a killed server again and waits until it answers.
func (f *Faults) Start(ctx context.Context) error {
	f.op.Lock()
	defer f.op.Unlock()
	return f.start(ctx)
}

// start is Start with f.op held.
func (f *Faults) start(ctx context.Context) error {
	if _, err := docker(ctx, "start", func(ctx context.Context) (client.ContainerStartResult, error) {
		return f.cli.ContainerStart(ctx, f.id, client.ContainerStartOptions{})
	}); err != nil {
		return fmt.Errorf("start %s: %w", f.srv.Kind, err)
	}
	return f.Ready(ctx)
}

// Restart kills the server with SIGKILL and starts it again, and says how
// long it did not answer.
func (f *Faults) Restart(ctx context.Context) (time.Duration, error) {
	f.op.Lock()
	defer f.op.Unlock()
	t0 := time.Now()
	if err := f.kill(ctx); err != nil {
		return 0, err
	}
	err := f.start(ctx)
	return time.Since(t0), err
}

// Heal undoes every fault: a paused server is resumed, a killed one
// started; it returns once the server answers.
//
// It asks Docker what the container is (paused, stopped) instead of
// trusting what this process did: a fault call that timed out on a slow
// daemon may still have happened, or not.
func (f *Faults) Heal(ctx context.Context) error {
	f.op.Lock()
	defer f.op.Unlock()
	st, err := f.state(ctx)
	if err != nil {
		return fmt.Errorf("heal %s: inspect: %w", f.srv.Kind, err)
	}
	if st.Paused {
		if err := f.resume(ctx); err != nil {
			return err
		}
	}
	if !st.Running {
		return f.start(ctx)
	}
	return f.Ready(ctx)
}

// containerState is what Docker says the container is.
type containerState struct{ Paused, Running bool }

// state asks Docker whether the container is paused and running.
func (f *Faults) state(ctx context.Context) (containerState, error) {
	res, err := docker(ctx, "inspect", func(ctx context.Context) (client.ContainerInspectResult, error) {
		return f.cli.ContainerInspect(ctx, f.id, client.ContainerInspectOptions{})
	})
	if err != nil {
		return containerState{}, err
	}
	st := res.Container.State
	if st == nil {
		return containerState{}, nil
	}
	return containerState{Paused: st.Paused, Running: st.Running}, nil
}

// Ready waits until the server answers a ping (Postgres: a new connection
// and a query, so recovery after a crash is over; Redis: PING, which
// answers LOADING until the append-only file is read back). A ping that
// runs out of time is given twice as long the next time, up to
// readyPingMax: a restarted Postgres on a starved machine, its recovery
// and the load's connection attempts beside two CPU-spinning processes,
// took longer than a fixed 2 s to give a ping its session every time,
// and chaos waited for it for the whole of the machine's overload (420
// s).
func (f *Faults) Ready(ctx context.Context) error {
	var last error
	for wait := readyPing; ; {
		pctx, cancel := context.WithTimeout(ctx, wait)
		last = ping(pctx, f.srv)
		timedOut := pctx.Err() != nil
		cancel()
		if last == nil {
			return nil
		}
		if timedOut {
			wait = min(2*wait, readyPingMax)
		}
		if err := faults.Pause(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("%s did not come back: %v", f.srv.Kind, last)
		}
	}
}

// readyPing and readyPingMax bound a ping of Ready: the first, and the
// longest once pings run out of time.
const (
	readyPing    = 2 * time.Second
	readyPingMax = 30 * time.Second
)

// HostPort is the host address the container's server port is published
// on now, or the server's own for a container on the host network (it
// must not change across a restart).
func (f *Faults) HostPort(ctx context.Context) (string, error) {
	res, err := docker(ctx, "inspect", func(ctx context.Context) (client.ContainerInspectResult, error) {
		return f.cli.ContainerInspect(ctx, f.id, client.ContainerInspectOptions{})
	})
	if err != nil {
		return "", err
	}
	if hc := res.Container.HostConfig; hc != nil && hc.NetworkMode == "host" {
		return "host network, " + hostPortOf(f.srv.Addr), nil
	}
	ns := res.Container.NetworkSettings
	if ns == nil {
		return "", errors.New("no network settings")
	}
	for port, bs := range ns.Ports {
		for _, b := range bs {
			return fmt.Sprintf("%s->%s:%s", port, b.HostIP, b.HostPort), nil
		}
	}
	return "", errors.New("no published port")
}

// ping checks once that the server answers.
func ping(ctx context.Context, srv *Server) error {
	facts, ok := kinds[srv.Kind]
	if !ok {
		return fmt.Errorf("unknown server kind %q", srv.Kind)
	}
	return facts.ping(ctx, srv.Addr)
}

// hostPortOf is the host:port of a store address: a Postgres DSN's host,
// or Redis's address itself.
func hostPortOf(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Host
	}
	return addr
}

// dockerCallTimeout bounds one Docker API call that injects, heals or
// inspects a fault. Each takes milliseconds, seconds on a loaded machine;
// one that has not answered in this long has hung (a network disconnect
// at load 95 hung for 18 minutes in a test), and the fault fails with an
// error that says so instead of stalling the run. A variable for tests.
var dockerCallTimeout = 2 * time.Minute

// docker makes one Docker API call (what names it) under
// dockerCallTimeout.
func docker[T any](ctx context.Context, what string, call func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, dockerCallTimeout)
	defer cancel()
	v, err := call(cctx)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		err = fmt.Errorf("docker %s did not answer within %v: %w", what, dockerCallTimeout, err)
	}
	return v, err
}
