package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// Fault kinds of the server, as ScenarioResult.Faults counts them.
const (
	// FaultServerPause: the server was frozen (docker pause: every process
	// of its container stopped, as with SIGSTOP) and thawed later.
	FaultServerPause = "server-pause"
	// FaultServerRestart: the server was killed with SIGKILL (docker kill)
	// and started again on the same data and the same port.
	FaultServerRestart = "server-restart"
)

// ServerFaults injects faults into the Postgres or Redis server behind a
// store: it freezes and thaws the server's container, kills it with SIGKILL
// and starts it again. The container keeps its data (its file system) and
// its host port across a restart (harness/servers binds a fixed port), so
// stores reconnect to the same address by themselves: pgx's pool and
// go-redis drop a broken connection at its first error and dial anew.
// It works only for a server this process started (Server.Managed).
type ServerFaults struct {
	srv *servers.Server
	cli *client.Client
	id  string

	mu     sync.Mutex
	paused bool
	down   bool
}

// ServerFaultsSkip says why the server behind o cannot be faulted, or ""
// if it can.
func ServerFaultsSkip(o Options) string {
	switch {
	case o.Backend.Lives != stores.Server:
		return fmt.Sprintf("the %s store is embedded: there is no server to pause or restart (killed processes are the workers scenario)", o.Backend.Name)
	case o.OpenStore != nil:
		return "the store comes from a factory: its server, if any, is not known to the harness"
	case o.Server == nil:
		return "no server handle (Options.Server): run from the idemcheck CLI"
	case !o.Server.Managed:
		return fmt.Sprintf("the %s server comes from the environment (%s), not a container this run started: it cannot be paused or restarted", o.Server.Kind, o.Server.Source)
	}
	return ""
}

// NewServerFaults connects to the Docker daemon that runs srv's container.
func NewServerFaults(srv *servers.Server) (*ServerFaults, error) {
	ctr := srv.Container()
	if ctr == nil || !srv.Managed {
		return nil, fmt.Errorf("the %s server is not a container this process started: it cannot be faulted", srv.Kind)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &ServerFaults{srv: srv, cli: cli, id: ctr.GetContainerID()}, nil
}

// Close closes the Docker client (the container stays as it is).
func (f *ServerFaults) Close() error { return f.cli.Close() }

// Pause freezes the server: connections stay open, calls hang.
func (f *ServerFaults) Pause(ctx context.Context) error {
	if _, err := f.cli.ContainerPause(ctx, f.id, client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause %s: %w", f.srv.Kind, err)
	}
	f.mu.Lock()
	f.paused = true
	f.mu.Unlock()
	return nil
}

// Resume thaws a paused server; the calls it had received run now.
func (f *ServerFaults) Resume(ctx context.Context) error {
	if _, err := f.cli.ContainerUnpause(ctx, f.id, client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("resume %s: %w", f.srv.Kind, err)
	}
	f.mu.Lock()
	f.paused = false
	f.mu.Unlock()
	return nil
}

// Kill kills the server with SIGKILL (no shutdown, no flush beyond what
// it had already made durable) and waits until its container has stopped.
func (f *ServerFaults) Kill(ctx context.Context) error {
	f.mu.Lock()
	paused := f.paused
	f.mu.Unlock()
	if paused { // a frozen process cannot be killed until it is thawed
		if err := f.Resume(ctx); err != nil {
			return err
		}
	}
	if _, err := f.cli.ContainerKill(ctx, f.id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", f.srv.Kind, err)
	}
	for {
		res, err := f.cli.ContainerInspect(ctx, f.id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("kill %s: inspect: %w", f.srv.Kind, err)
		}
		if st := res.Container.State; st == nil || !st.Running {
			break
		}
		if err := faults.Pause(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("kill %s: still running: %w", f.srv.Kind, err)
		}
	}
	f.mu.Lock()
	f.down = true
	f.mu.Unlock()
	return nil
}

// Start starts a killed server again and waits until it answers.
func (f *ServerFaults) Start(ctx context.Context) error {
	if _, err := f.cli.ContainerStart(ctx, f.id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start %s: %w", f.srv.Kind, err)
	}
	f.mu.Lock()
	f.down = false
	f.mu.Unlock()
	return f.Ready(ctx)
}

// Restart kills the server with SIGKILL and starts it again, and says how
// long it did not answer.
func (f *ServerFaults) Restart(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	if err := f.Kill(ctx); err != nil {
		return 0, err
	}
	err := f.Start(ctx)
	return time.Since(t0), err
}

// Heal undoes every fault: a paused server is resumed, a killed one
// started; it returns once the server answers.
func (f *ServerFaults) Heal(ctx context.Context) error {
	f.mu.Lock()
	paused, down := f.paused, f.down
	f.mu.Unlock()
	if paused {
		if err := f.Resume(ctx); err != nil {
			return err
		}
	}
	if down {
		return f.Start(ctx)
	}
	return f.Ready(ctx)
}

// Ready waits until the server answers a ping (Postgres: a new connection
// and a query, so recovery after a crash is over; Redis: PING, which
// answers LOADING until the append-only file is read back).
func (f *ServerFaults) Ready(ctx context.Context) error {
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ping(pctx, f.srv)
		cancel()
		if last == nil {
			return nil
		}
		if err := faults.Pause(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("%s did not come back: %v", f.srv.Kind, last)
		}
	}
}

// HostPort is the host address the container's server port is published
// on now (it must not change across a restart).
func (f *ServerFaults) HostPort(ctx context.Context) (string, error) {
	res, err := f.cli.ContainerInspect(ctx, f.id, client.ContainerInspectOptions{})
	if err != nil {
		return "", err
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
func ping(ctx context.Context, srv *servers.Server) error {
	switch srv.Kind {
	case servers.Postgres:
		conn, err := pgx.Connect(ctx, srv.Addr)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		return conn.Ping(ctx)
	case servers.Redis:
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, MaxRetries: -1, PoolSize: 1, DisableIdentity: true})
		defer c.Close()
		return c.Ping(ctx).Err()
	}
	return fmt.Errorf("unknown server kind %q", srv.Kind)
}
