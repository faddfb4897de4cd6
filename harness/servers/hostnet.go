package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/idemcheck/idemcheck/internal/loopback"
)

// EnvDockerNetwork, set to "bridge", makes every server container publish
// its port through Docker's bridge instead of sharing the host's network
// (see [hostNetwork]).
const EnvDockerNetwork = "IDEM_DOCKER_NETWORK"

// hostNetwork reports whether a server container of this process should
// share the host's network namespace, listening on a loopback port picked
// for it, rather than sit behind a port Docker publishes.
//
// A published port on loopback is relayed by Docker's userland proxy
// (docker-proxy): every packet is copied through one more process. On a
// 2-core machine it doubled a Redis PING (54 µs on the container's own
// address, 107 µs through the proxy), and the proxy's copying took CPU
// from the clients and the server under load. A container on the host
// network also starts in half the time (no bridge endpoint, no proxy):
// 0.27 s against 0.57 s, and a restart 0.23 s against 0.51 s. Its address
// stays the same across a restart, as a published port's does, where a
// container's own bridge address may go to another container meanwhile.
//
// It is only for a daemon that shares this machine's network: a local
// daemon (a unix socket) on Linux, neither Docker Desktop, whose daemon
// runs in a VM, nor a rootless daemon, whose host network is a namespace
// of its own. Whatever these say, a server on the host network is tried
// from here before it is used (see [reachable]); one that cannot be
// reached, or that does not start there for any reason but a taken port
// (a daemon that refuses the host network), turns the host network off
// for the rest of the process, and the server is started again behind a
// published port. IDEM_DOCKER_NETWORK=bridge turns it off from the
// start.
func hostNetwork(ctx context.Context, cli *client.Client) bool {
	if hostNetOff.Load() || os.Getenv(EnvDockerNetwork) == "bridge" || runtime.GOOS != "linux" || !localDaemon(cli) {
		return false
	}
	daemonNet.once.Do(func() {
		info, err := cli.Info(ctx, client.InfoOptions{})
		daemonNet.apart = err != nil || strings.Contains(info.Info.OperatingSystem, "Docker Desktop") ||
			slices.ContainsFunc(info.Info.SecurityOptions, func(o string) bool { return strings.Contains(o, "rootless") })
	})
	return !daemonNet.apart
}

// daemonNet is whether the daemon's host network is apart from this
// machine's (Docker Desktop, rootless) or the daemon would not say,
// asked once per process.
var daemonNet struct {
	once  sync.Once
	apart bool
}

// hostNetOff is set once a server on the host network could not be
// reached from this process, or did not start there for a reason other
// than a taken port: the rest of its servers publish a port.
var hostNetOff atomic.Bool

// errUnreachable is a host-network server that does not answer here.
var errUnreachable = errors.New("a server on the host network does not answer on this machine's loopback")

// errPortTaken is a host-network server whose port another process took
// between [freePort] and the server's bind.
var errPortTaken = errors.New("address already in use")

// onHostNetwork puts a container in the host's network namespace. Ports
// the module exposes are not published (Docker would ignore them).
func onHostNetwork() testcontainers.ContainerCustomizer {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.NetworkMode = "host"
		hc.PortBindings = nil
	})
}

// freePort picks a loopback port for a server on the host network, or
// for a published one. Another process may take it before the server
// binds it; the server then fails with "Address already in use", which
// [portTaken] recognises, and the start is tried again on another port,
// up to [portAttempts] starts in all.
var freePort = loopback.FreePort

// portAttempts bounds the starts of one server whose picked port was
// taken each time. [loopback.FreePort] draws outside the ephemeral range,
// so only another process picking the same port at once can take it.
const portAttempts = 3

// onLoopback is the address of a host-network server's port.
func onLoopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// reachHost is where a new server on the host network is tried from
// here: its loopback address, a variable so that a test can stand in for
// a daemon whose host network is not this machine's.
var reachHost = "127.0.0.1"

// reachable waits up to reachTimeout for a TCP connection to hostport,
// whose server has said it listens. It fails with errUnreachable.
func reachable(ctx context.Context, hostport string) error {
	ctx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", hostport)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%s: %v)", errUnreachable, hostport, err)
		case <-time.After(startPoll):
		}
	}
}

// reachTimeout bounds [reachable]: the server's log already said it
// listens, so a refused connection means another network, not a slow
// server.
const reachTimeout = 3 * time.Second
