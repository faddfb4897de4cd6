package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// startTimeout is the options' StartTimeout, or the default.
func startTimeout(opts Options) time.Duration {
	if opts.StartTimeout > 0 {
		return opts.StartTimeout
	}
	return defaultStartTimeout
}

// startContainer runs a container of kind with testcontainers' module.
func startContainer(ctx context.Context, kind Kind, opts Options) (*Server, error) {
	t0 := time.Now()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cli, err := dockerClient()
	if err != nil {
		return nil, errorf(kind, true, "docker is not usable: fix DOCKER_HOST, or set %s (%v)", kinds[kind].envAddr, err)
	}
	defer cli.Close()
	if err := checkDocker(pctx, cli, kind); err != nil {
		return nil, err
	}
	prepare(pctx, cli)
	if reaped > 0 && opts.Notef != nil && reapedSaid.CompareAndSwap(false, true) {
		opts.Notef("removed %d container(s) left behind by an idemcheck run that was killed", reaped)
	}

	timeout := startTimeout(opts)
	rctx, rcancel := context.WithTimeout(ctx, timeout)
	defer rcancel()
	// A pull must start answering within pullAnswerTimeout; once it does, it
	// may take the whole start timeout.
	img, err := chooseImage(rctx, cli, kind, opts)
	if err != nil {
		return nil, err
	}

	var s *Server
	for attempt := 1; ; attempt++ {
		host := hostNetwork(rctx, cli)
		s, err = runOnce(rctx, cli, kind, img, host, opts)
		if err != nil && host && !portTaken(err) && rctx.Err() == nil {
			// A daemon that refuses the host network, or whose host
			// network is not this machine's: never again in this process.
			hostNetOff.Store(true)
			if opts.Logf != nil {
				opts.Logf("servers: on the host network: %v: publishing ports instead", err)
			}
			s, err = runOnce(rctx, cli, kind, img, false, opts)
		}
		if err == nil || attempt == portAttempts || !portTaken(err) {
			break
		}
	}
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			err = errorf(kind, false, "cannot start %s from image %s: %v", kind, img, err)
		}
		return nil, err
	}
	if opts.Logf != nil {
		opts.Logf("servers: %s ready in %s", s, time.Since(t0).Round(time.Millisecond))
	}
	return s, nil
}

// runOnce creates and starts one container, on the host network if host
// (see [hostNetwork]); on any failure the container, even half-created,
// is removed before it returns.
func runOnce(ctx context.Context, cli *client.Client, kind Kind, img string, host bool, opts Options) (s *Server, err error) {
	timeout := startTimeout(opts)
	startID := session + "-" + strconv.FormatInt(starts.Add(1), 10)
	labels := map[string]string{
		LabelManaged: "1",
		LabelKind:    string(kind),
		LabelSession: session,
		LabelOwner:   owner(),
		labelStart:   startID,
	}
	facts := kinds[kind]
	common := []testcontainers.ContainerCustomizer{
		testcontainers.WithLabels(labels),
		testcontainers.WithLogger(logfLogger{opts.Logf}),
	}
	port := 0
	if host {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	} else {
		common = append(common, testcontainers.WithHostConfigModifier(bindLoopback(cli, facts.port+"/tcp")))
	}

	var ctr testcontainers.Container
	var addr string
	// Register before anything can be created, so CloseAll sees it.
	s = &Server{Kind: kind, Source: "container:" + img, Managed: true, Image: img}
	pending := register(s)
	defer func() {
		if err == nil {
			return
		}
		unregister(s)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		last, taken := "", false
		if ctr != nil {
			log := containerLog(cctx, ctr)
			// A server that could not bind its port says so a few
			// lines before its last.
			last, taken = lastLines(log), port != 0 && strings.Contains(strings.ToLower(log), "address already in use")
			_ = ctr.Terminate(cctx, testcontainers.StopTimeout(0))
		}
		_, _ = removeLabelled(cctx, cli, labelStart+"="+startID)
		if taken {
			err = fmt.Errorf("port %d: %w", port, errPortTaken) // taken since freePort
		}
		if !portTaken(err) {
			msg := fmt.Sprintf("cannot start %s from image %s: %v", kind, img, err)
			if last != "" {
				msg += " (container log: " + last + ")"
			}
			err = errorf(kind, false, "%s", msg)
		}
		s = nil
	}()

	ctr, addr, err = facts.run(ctx, img, timeout, port, common)
	if err == nil && port != 0 {
		err = reachable(ctx, net.JoinHostPort(reachHost, strconv.Itoa(port)))
	}
	if err == nil && pending.Load() {
		err = errors.New("interrupted: CloseAll was called while it started")
	}
	if err != nil {
		return nil, err
	}
	s.Addr = addr
	s.ctr = ctr
	if !attach(s) {
		return nil, errors.New("interrupted: CloseAll was called while it started")
	}
	return s, nil
}

// bindLoopback publishes the container port on 127.0.0.1 only (the test
// password must not face the network) at a port picked now, so that a
// restarted container keeps its address. For a remote daemon it leaves
// Docker's default (any address, ephemeral port).
func bindLoopback(cli *client.Client, containerPort string) func(*container.HostConfig) {
	return func(hc *container.HostConfig) {
		if !localDaemon(cli) {
			return
		}
		p, err := network.ParsePort(containerPort)
		if err != nil {
			return
		}
		hostPort := "0"
		if port, err := freePort(); err == nil {
			hostPort = strconv.Itoa(port)
		}
		if hc.PortBindings == nil {
			hc.PortBindings = network.PortMap{}
		}
		hc.PortBindings[p] = []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: hostPort}}
	}
}

// portTaken reports whether err says the picked host port was taken meanwhile.
func portTaken(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errPortTaken) {
		return true
	}
	m := err.Error()
	return strings.Contains(m, "port is already allocated") || strings.Contains(m, "address already in use")
}

// containerLog is the container's log, its first 4 MiB ("" if Docker
// will not give it).
func containerLog(ctx context.Context, ctr testcontainers.Container) string {
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 4<<20))
	return string(b)
}

// lastLogLines returns the container's last three non-empty log lines,
// joined with " | " and cut to 300 bytes, for a one-line error.
func lastLogLines(ctx context.Context, ctr testcontainers.Container) string {
	return lastLines(containerLog(ctx, ctr))
}

// lastLines is lastLogLines of a log already read.
func lastLines(log string) string {
	var last []string
	for l := range strings.Lines(log) {
		if l = strings.TrimSpace(l); l != "" {
			last = append(last, l)
			if len(last) > 3 {
				last = last[1:]
			}
		}
	}
	out := strings.Join(last, " | ")
	if len(out) > 300 {
		out = "..." + out[len(out)-300:]
	}
	return out
}

// registry of the live servers of this process, for CloseAll.
var reg = struct {
	sync.Mutex
	live    map[*Server]bool
	pending map[*Server]*atomic.Bool // being started; true once CloseAll ran
	closing bool
}{live: map[*Server]bool{}, pending: map[*Server]*atomic.Bool{}}

// register records s as being started.
func register(s *Server) *atomic.Bool {
	reg.Lock()
	defer reg.Unlock()
	b := &atomic.Bool{}
	b.Store(reg.closing)
	reg.pending[s] = b
	return b
}

// attach turns a pending server into a live one, unless CloseAll ran.
func attach(s *Server) bool {
	reg.Lock()
	defer reg.Unlock()
	b := reg.pending[s]
	delete(reg.pending, s)
	if b == nil || b.Load() {
		return false
	}
	reg.live[s] = true
	return true
}

// unregister forgets s (closed, or failed to start).
func unregister(s *Server) {
	reg.Lock()
	defer reg.Unlock()
	delete(reg.live, s)
	delete(reg.pending, s)
}
