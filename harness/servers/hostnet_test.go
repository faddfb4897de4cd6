package servers

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/moby/moby/client"
)

// TestServersOnEitherNetwork: a server on the host network (the default
// on a Linux machine whose Docker is local) and one behind a published
// port (IDEM_DOCKER_NETWORK=bridge) both answer on loopback, keep their
// address across a kill and a start, and answer again there; Postgres
// refuses a wrong password on both.
func TestServersOnEitherNetwork(t *testing.T) {
	clearEnv(t)
	for _, network := range []string{"", "bridge"} {
		for _, kind := range []Kind{Postgres, Redis} {
			name := network
			if name == "" {
				name = "default"
			}
			t.Run(name+"/"+string(kind), func(t *testing.T) {
				t.Setenv(EnvDockerNetwork, network)
				ctx := dockerCtx(t)
				cli, err := dockerClient()
				if err != nil {
					t.Fatal(err)
				}
				defer cli.Close()
				wantHost := hostNetwork(ctx, cli)
				if wantHost != (network == "" && runtime.GOOS == "linux" && localDaemon(cli) && !hostNetOff.Load() && !daemonNet.apart) {
					t.Errorf("hostNetwork said %v with %s=%q", wantHost, EnvDockerNetwork, network)
				}
				var mu sync.Mutex
				var fellBack []string
				s := ForTestOptions(t, kind, Options{Container: true, Logf: func(f string, a ...any) {
					if l := fmt.Sprintf(f, a...); strings.Contains(l, "publishing ports instead") {
						mu.Lock()
						fellBack = append(fellBack, l)
						mu.Unlock()
					}
					t.Logf(f, a...)
				}})
				res, err := cli.ContainerInspect(ctx, s.Container().GetContainerID(), client.ContainerInspectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				mode := string(res.Container.HostConfig.NetworkMode)
				mu.Lock()
				switch {
				case wantHost && len(fellBack) > 0 && strings.Contains(fellBack[0], errUnreachable.Error()):
					// This machine's daemon is not on its network: the
					// fallback is what it is for.
					t.Logf("the host network does not reach this machine: %s", fellBack[0])
					wantHost = false
				case wantHost && len(fellBack) > 0:
					t.Errorf("the server did not start on the host network: %s", fellBack[0])
					wantHost = false
				}
				mu.Unlock()
				if (mode == "host") != wantHost {
					t.Errorf("network mode %q, want the host network: %v", mode, wantHost)
				}
				if h, _, err := net.SplitHostPort(hostPortOf(s.Addr)); err != nil || h != "127.0.0.1" {
					t.Errorf("address %s: want 127.0.0.1:port (%v)", Redact(s.Addr), err)
				}
				f, err := NewFaults(s)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				before, err := f.HostPort(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Kill(ctx); err != nil {
					t.Fatal(err)
				}
				if err := f.Start(ctx); err != nil { // waits until it answers at s.Addr
					t.Fatal(err)
				}
				if after, err := f.HostPort(ctx); err != nil || after != before {
					t.Errorf("address %s before a restart, %s after (%v)", before, after, err)
				}
				if kind == Postgres {
					wrongPasswordRefused(ctx, t, s.Addr)
				}
			})
		}
	}
}

// wrongPasswordRefused fails t unless the Postgres at dsn refuses its
// user with another password.
func wrongPasswordRefused(ctx context.Context, t *testing.T, dsn string) {
	t.Helper()
	i := strings.Index(dsn, "@")
	j := strings.LastIndex(dsn[:i], ":")
	if i < 0 || j < 0 {
		t.Fatalf("no password in %s", Redact(dsn))
	}
	wrong := dsn[:j+1] + "not-the-password" + dsn[i:]
	if err := pgPing(ctx, wrong); err == nil || !strings.Contains(err.Error(), "28P01") {
		t.Errorf("a wrong password: want SQLSTATE 28P01, got %v", err)
	}
}

// TestUnreachableHostNetworkFallsBack: a server on the host network that
// does not answer here (tried at an address it does not listen on, as a
// daemon in another network namespace would give) is removed, and
// started again behind a published port, which answers; the rest of the
// process publishes ports.
func TestUnreachableHostNetworkFallsBack(t *testing.T) {
	_, cli := hostNetworkHere(t)
	reachHost = "127.0.0.2" // on loopback, but not the server's address
	t.Cleanup(func() { reachHost = "127.0.0.1"; hostNetOff.Store(false) })
	before := sessionContainers(t, SessionID())
	var mu sync.Mutex
	var said []string
	logf := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		said = append(said, fmt.Sprintf(f, a...))
	}
	s := ForTestOptions(t, Redis, Options{Container: true, Logf: logf})
	ctx := dockerCtx(t)
	res, err := cli.ContainerInspect(ctx, s.Container().GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Container.HostConfig.NetworkMode == "host" {
		t.Error("the server stayed on the host network")
	}
	if !hostNetOff.Load() {
		t.Error("the host network is still on for this process")
	}
	mu.Lock()
	if !slices.ContainsFunc(said, func(l string) bool { return strings.Contains(l, "publishing ports instead") }) {
		t.Errorf("the fallback was not said: %q", said)
	}
	mu.Unlock()
	if err := ping(ctx, s); err != nil {
		t.Errorf("the server behind a published port does not answer: %v", err)
	}
	if n := sessionContainers(t, SessionID()) - before; n != 1 {
		t.Errorf("%d more containers of this process, want 1 (the unreachable one removed)", n)
	}
}

// TestHostNetworkPortTakenIsTriedAgain: a port another process took
// between freePort and the server's bind ends the server at once with
// "Address already in use"; the start is tried again on another port,
// still on the host network.
func TestHostNetworkPortTakenIsTriedAgain(t *testing.T) {
	ctx, cli := hostNetworkHere(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var calls atomic.Int32
	real := freePort
	freePort = func() (int, error) {
		if calls.Add(1) == 1 {
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return real()
	}
	t.Cleanup(func() { freePort = real })
	for _, kind := range []Kind{Postgres, Redis} {
		calls.Store(0)
		s := ForTestOptions(t, kind, Options{Container: true})
		if calls.Load() != 2 {
			t.Errorf("%s: %d ports picked, want 2 (the taken one, then another)", kind, calls.Load())
		}
		if hostPortOf(s.Addr) == taken.Addr().String() {
			t.Errorf("%s: the server is at the taken port %s", kind, taken.Addr())
		}
		res, err := cli.ContainerInspect(ctx, s.Container().GetContainerID(), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Container.HostConfig.NetworkMode != "host" || hostNetOff.Load() {
			t.Errorf("%s: a taken port moved the server off the host network", kind)
		}
		if err := ping(ctx, s); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
}

// hostNetworkHere prepares a test of the host network's own paths
// (dockerReady: it fails without Docker under IDEM_REQUIRE_SERVERS=1),
// and skips it where this machine's servers do not use the host network.
func hostNetworkHere(t *testing.T) (context.Context, *client.Client) {
	t.Helper()
	dockerReady(t)
	t.Setenv(EnvDockerNetwork, "")
	ctx := dockerCtx(t)
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if !hostNetwork(ctx, cli) {
		t.Skip("this machine's servers do not use the host network")
	}
	return ctx, cli
}
