package servers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// Labels put on every container this package starts.
const (
	// LabelManaged marks idemcheck's containers (value "1"); Reap looks for it.
	LabelManaged = "idemcheck"
	// LabelKind holds the Kind.
	LabelKind = "idemcheck.kind"
	// LabelSession holds the starting process's session ID (CloseAll).
	LabelSession = "idemcheck.session"
	// LabelOwner holds host/pid/process-start-time of the starting process (Reap).
	LabelOwner = "idemcheck.owner"
	// labelStart is unique per Start call, to find a half-created container.
	labelStart = "idemcheck.start"
)

const (
	// probeTimeout bounds the Docker checks before a container is created, so
	// that "no Docker" and "no image" are reported within 15 seconds.
	probeTimeout = 12 * time.Second
	// pullAnswerTimeout is how long a registry has to start answering a pull.
	pullAnswerTimeout = 5 * time.Second
	// defaultStartTimeout bounds creating and starting one container:
	// Postgres's initdb took over a minute beside a soak's CPU hogs.
	defaultStartTimeout = 3 * time.Minute
	// cleanupTimeout bounds removing containers after a failure or signal.
	cleanupTimeout = 30 * time.Second
)

// session identifies this process's containers.
var session = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// SessionID returns the value of the idemcheck.session label on the
// containers this process starts.
func SessionID() string { return session }

// starts numbers the Start calls of this process (for labelStart).
var starts atomic.Int64

// prepared is set once the testcontainers environment has been decided.
var prepared sync.Once

// reaped counts the containers of killed runs that prepare removed; the
// first Start with a Notef says so.
var (
	reaped     int
	reapedSaid atomic.Bool
)

// tcLogf receives testcontainers' global log lines when IDEM_DEBUG=1.
var tcLogf atomic.Pointer[func(string, ...any)]

type logfLogger struct{ logf func(string, ...any) }

func (l logfLogger) Printf(format string, args ...any) {
	if l.logf != nil {
		l.logf(format, args...)
	}
}

type globalLogger struct{}

func (globalLogger) Printf(format string, args ...any) {
	if f := tcLogf.Load(); f != nil {
		(*f)(format, args...)
	}
}

// dockerClient returns a client for the daemon named by DOCKER_HOST (or the
// default socket), the same one testcontainers finds first.
func dockerClient() (*client.Client, error) {
	return client.New(client.FromEnv)
}

// checkDocker pings the daemon and says, in one line, what to do when it
// does not answer.
func checkDocker(ctx context.Context, cli *client.Client, kind Kind) error {
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		host := cli.DaemonHost()
		if errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "permission denied") {
			// A daemon runs, but this user may not use its socket: the
			// client reports that as a failed connection too.
			return errorf(kind, true, "docker is running but this user may not use it (permission denied at %s): add the user to the docker group, run as a user who may, or set %s", host, kinds[kind].envAddr)
		}
		if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) {
			return errorf(kind, true, "docker is not running: start it, or set %s (no daemon answers at %s)", kinds[kind].envAddr, host)
		}
		return errorf(kind, true, "docker is not usable: fix it, or set %s (%s: %v)", kinds[kind].envAddr, host, err)
	}
	return nil
}

// Prepare sets testcontainers' environment for this machine: loopback
// (TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1) inside a container or with a local
// daemon, Ryuk off (TESTCONTAINERS_RYUK_DISABLED=true) when its image is not
// present, and removes leftovers of killed runs (Reap). testcontainers reads
// its configuration once per process, so code that uses testcontainers other
// than through Start must call Prepare first. Start calls it; it runs once.
func Prepare(ctx context.Context) error {
	cli, err := dockerClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return err
	}
	prepare(ctx, cli)
	return nil
}

// prepare is Prepare with a working client.
func prepare(ctx context.Context, cli *client.Client) {
	prepared.Do(func() {
		if _, set := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); !set && (inContainer() || localDaemon(cli)) {
			_ = os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
		}
		if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set && !haveRyuk(ctx, cli) {
			_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
		if os.Getenv("IDEM_DEBUG") == "1" {
			f := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testcontainers: "+format+"\n", args...) }
			tcLogf.Store(&f)
		}
		tclog.SetDefault(globalLogger{})
		reaped, _ = reap(ctx, cli)
	})
}

// inContainer reports whether this process runs inside a container.
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

// localDaemon reports whether the daemon is reached through a unix socket,
// so that the ports it publishes are on this machine's loopback.
func localDaemon(cli *client.Client) bool {
	return strings.HasPrefix(cli.DaemonHost(), "unix://")
}

// haveRyuk reports whether some testcontainers/ryuk image is present locally.
func haveRyuk(ctx context.Context, cli *client.Client) bool {
	res, err := cli.ImageList(ctx, client.ImageListOptions{})
	if err != nil {
		return false
	}
	for _, img := range res.Items {
		for _, tag := range img.RepoTags {
			tag = strings.TrimPrefix(tag, "docker.io/")
			if strings.HasPrefix(tag, "testcontainers/ryuk:") {
				return true
			}
		}
	}
	return false
}
