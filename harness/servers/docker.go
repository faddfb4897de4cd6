package servers

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
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

// startTimeout is the options' StartTimeout, or the default.
func startTimeout(opts Options) time.Duration {
	if opts.StartTimeout > 0 {
		return opts.StartTimeout
	}
	return defaultStartTimeout
}

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

// noPull remembers images whose pull failed: registries don't come back
// during one run, and each probe costs time.
var noPull sync.Map // image -> error

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
		if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) {
			return errorf(kind, true, "docker is not running: start it, or set %s (no daemon answers at %s)", envAddr(kind), host)
		}
		return errorf(kind, true, "docker is not usable: fix it, or set %s (%s: %v)", envAddr(kind), host, err)
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

// imageNames returns the official image, the default local image and the
// environment variable that overrides the latter.
func imageNames(kind Kind) (official, local, env string) {
	if kind == Postgres {
		return officialImage[Postgres], LocalPostgresImage, EnvPostgresImage
	}
	return officialImage[Redis], LocalRedisImage, EnvRedisImage
}

// officialImage is a variable so that tests can stand a local image in for
// an official one without retagging images in a shared daemon.
var officialImage = map[Kind]string{Postgres: OfficialPostgresImage, Redis: OfficialRedisImage}

// chooseImage picks the image to run: an explicit one (Options.Image or the
// IDEM_*_IMAGE variable), else the official image if present or pullable,
// else the local image.
func chooseImage(ctx context.Context, cli *client.Client, kind Kind, opts Options) (string, error) {
	official, local, env := imageNames(kind)
	explicit := opts.Image
	if explicit == "" {
		explicit = os.Getenv(env)
	}
	if explicit != "" {
		if err := ensureImage(ctx, cli, explicit, opts.Logf); err != nil {
			return "", errorf(kind, true, "image %s not found: run `make images`, or set %s (%v)", explicit, envAddr(kind), err)
		}
		return explicit, nil
	}
	if err := ensureImage(ctx, cli, official, opts.Logf); err == nil {
		return official, nil
	} else if opts.Logf != nil {
		opts.Logf("servers: %s unavailable (%v); trying %s", official, err, local)
	}
	if present(ctx, cli, local) {
		return local, nil
	}
	return "", errorf(kind, true, "image %s not found: run `make images`, or set %s", local, envAddr(kind))
}

// present reports whether img is in the daemon's image store.
func present(ctx context.Context, cli *client.Client, img string) bool {
	_, err := cli.ImageInspect(ctx, img)
	return err == nil
}

// ensureImage makes img present locally, pulling it if a registry answers
// within pullAnswerTimeout (a pull that has started may take as long as ctx
// allows). Failed pulls are remembered for the rest of the process.
func ensureImage(ctx context.Context, cli *client.Client, img string, logf func(string, ...any)) error {
	if present(ctx, cli, img) {
		return nil
	}
	if err, ok := noPull.Load(img); ok {
		return err.(error)
	}
	err := pull(ctx, cli, img, logf)
	if err != nil {
		noPull.Store(img, err)
	}
	return err
}

func pull(ctx context.Context, cli *client.Client, img string, logf func(string, ...any)) error {
	t0 := time.Now()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answered := atomic.Bool{}
	timer := time.AfterFunc(pullAnswerTimeout, func() {
		if !answered.Load() {
			cancel()
		}
	})
	defer timer.Stop()
	resp, err := cli.ImagePull(pctx, img, client.ImagePullOptions{})
	if err == nil {
		defer resp.Close()
		for msg, merr := range resp.JSONMessages(pctx) {
			if merr != nil {
				err = merr
				break
			}
			if msg.Error != nil {
				err = msg.Error
				break
			}
			if !answered.Swap(true) && logf != nil {
				logf("servers: pulling %s", img)
			}
		}
	}
	if err != nil {
		if !answered.Load() && pctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("pull: no registry answered within %s", pullAnswerTimeout)
		}
		return fmt.Errorf("pull: %s", oneLine(err.Error()))
	}
	if !present(ctx, cli, img) {
		return errors.New("pull finished but the image is not there")
	}
	if logf != nil {
		logf("servers: pulled %s in %s", img, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// startContainer runs a container of kind with testcontainers' module.
func startContainer(ctx context.Context, kind Kind, opts Options) (*Server, error) {
	t0 := time.Now()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cli, err := dockerClient()
	if err != nil {
		return nil, errorf(kind, true, "docker is not usable: fix DOCKER_HOST, or set %s (%v)", envAddr(kind), err)
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
		s, err = runOnce(rctx, cli, kind, img, opts)
		if err == nil || attempt == 2 || !portTaken(err) {
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

// runOnce creates and starts one container; on any failure the container,
// even half-created, is removed before it returns.
func runOnce(ctx context.Context, cli *client.Client, kind Kind, img string, opts Options) (s *Server, err error) {
	timeout := startTimeout(opts)
	startID := session + "-" + strconv.FormatInt(starts.Add(1), 10)
	labels := map[string]string{
		LabelManaged: "1",
		LabelKind:    string(kind),
		LabelSession: session,
		LabelOwner:   owner(),
		labelStart:   startID,
	}
	containerPort := "5432/tcp"
	if kind == Redis {
		containerPort = "6379/tcp"
	}
	common := []testcontainers.ContainerCustomizer{
		testcontainers.WithLabels(labels),
		testcontainers.WithLogger(logfLogger{opts.Logf}),
		testcontainers.WithHostConfigModifier(bindLoopback(cli, containerPort)),
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
		last := ""
		if ctr != nil {
			last = lastLogLines(cctx, ctr)
			_ = ctr.Terminate(cctx, testcontainers.StopTimeout(0))
		}
		_, _ = removeLabelled(cctx, cli, labelStart+"="+startID)
		if !portTaken(err) {
			msg := fmt.Sprintf("cannot start %s from image %s: %v", kind, img, err)
			if last != "" {
				msg += " (container log: " + last + ")"
			}
			err = errorf(kind, false, "%s", msg)
		}
		s = nil
	}()

	switch kind {
	case Postgres:
		var pc *tcpostgres.PostgresContainer
		// The module's own wait (tcpostgres.BasicWaitStrategies) gives
		// initdb 60 s, whatever the start timeout: on a loaded machine (a
		// soak beside CPU hogs) initdb took longer. The same waits, bounded
		// by the start timeout instead.
		pc, err = tcpostgres.Run(ctx, img, append(common, testcontainers.WithWaitStrategyAndDeadline(timeout,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2).WithStartupTimeout(timeout),
			wait.ForListeningPort("5432/tcp").WithStartupTimeout(timeout)))...)
		if pc != nil {
			ctr = pc
		}
		if err == nil {
			addr, err = pc.ConnectionString(ctx, "sslmode=disable")
		}
	case Redis:
		var rc *tcredis.RedisContainer
		rc, err = tcredis.Run(ctx, img, append(common,
			testcontainers.WithCmd("redis-server", "--appendonly", "yes", "--appendfsync", "always"),
			// The module waits 10 s for the port; the start timeout here.
			testcontainers.WithWaitStrategyAndDeadline(timeout,
				wait.ForListeningPort("6379/tcp").WithStartupTimeout(timeout),
				wait.ForLog("* Ready to accept connections").WithStartupTimeout(timeout)))...)
		if rc != nil {
			ctr = rc
		}
		if err == nil {
			var ep string
			ep, err = rc.ConnectionString(ctx)
			addr = redisAddr(ep)
		}
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
		if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
			hostPort = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
			_ = l.Close()
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
	m := err.Error()
	return strings.Contains(m, "port is already allocated") || strings.Contains(m, "address already in use")
}

// lastLogLines returns the container's last three non-empty log lines,
// joined with " | " and cut to 300 bytes, for a one-line error.
func lastLogLines(ctx context.Context, ctr testcontainers.Container) string {
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	var last []string
	sc := bufio.NewScanner(io.LimitReader(rc, 4<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
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

// CloseAll removes every container this process started and has not closed,
// including ones still starting (their Start fails). It is meant for a
// CLI's SIGINT/SIGTERM handler, or for the end of main.
func CloseAll(ctx context.Context) error {
	reg.Lock()
	servers := make([]*Server, 0, len(reg.live))
	for s := range reg.live {
		servers = append(servers, s)
	}
	for _, b := range reg.pending {
		b.Store(true)
	}
	reg.Unlock()

	var errs []error
	for _, s := range servers {
		if err := s.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Containers created but not yet handed back by testcontainers.
	if cli, err := dockerClient(); err == nil {
		if _, err := removeLabelled(ctx, cli, LabelSession+"="+session); err != nil {
			errs = append(errs, err)
		}
		// The networks of replicated topologies, once their containers are gone.
		if err := removeNetworks(ctx, cli, func(labels map[string]string) bool { return labels[LabelSession] == session }); err != nil {
			errs = append(errs, err)
		}
		_ = cli.Close()
	}
	return errors.Join(errs...)
}

// Reap removes containers left by idemcheck runs that were killed before
// they could clean up: containers labelled idemcheck=1 whose owning process,
// on this host, is gone. Containers of live processes and of other hosts
// sharing the daemon are left alone. It returns how many it removed. Start
// calls it once per process.
func Reap(ctx context.Context) (int, error) {
	cli, err := dockerClient()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	return reap(ctx, cli)
}

func reap(ctx context.Context, cli *client.Client) (int, error) {
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelManaged+"=1"),
	})
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range res.Items {
		if c.Labels[LabelSession] == session || ownerAlive(c.Labels[LabelOwner]) {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", shortID(c.ID), err))
			continue
		}
		n++
	}
	dead := func(labels map[string]string) bool {
		return labels[LabelSession] != session && !ownerAlive(labels[LabelOwner])
	}
	if err := removeNetworks(ctx, cli, dead); err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// removeNetworks removes the networks labelled idemcheck=1 for which
// which says yes (a network some container still uses stays).
func removeNetworks(ctx context.Context, cli *client.Client, which func(labels map[string]string) bool) error {
	res, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", LabelManaged+"=1")})
	if err != nil {
		return err
	}
	var errs []error
	for _, nw := range res.Items {
		if !which(nw.Labels) {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, nw.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", nw.Name, err))
		}
	}
	return errors.Join(errs...)
}

// removeLabelled force-removes all containers carrying label (k=v).
func removeLabelled(ctx context.Context, cli *client.Client, label string) (int, error) {
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", label),
	})
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range res.Items {
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", shortID(c.ID), err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// owner is this process as "host/pid/start", start being the process start
// time from /proc (empty where there is none).
func owner() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return url.PathEscape(host) + "/" + strconv.Itoa(pid) + "/" + procStart(pid)
}

// ownerAlive reports whether the process named by an owner label may still
// run: it is on this host, its pid exists and its start time matches.
// Unparseable labels and other hosts count as alive (left alone).
func ownerAlive(label string) bool {
	parts := strings.Split(label, "/")
	if len(parts) != 3 {
		return true
	}
	host, _ := os.Hostname()
	if parts[0] != url.PathEscape(host) {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return true
	}
	if _, err := os.Stat("/proc/" + parts[1]); err != nil {
		if _, err := os.Stat("/proc/self"); err != nil {
			return true // no /proc here: cannot tell
		}
		return false
	}
	return parts[2] == "" || procStart(pid) == parts[2]
}

// procStart returns field 22 of /proc/PID/stat (start time in clock ticks).
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// After "pid (comm)", fields start at 3 (state); starttime is field 22.
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func isNotFound(err error) bool {
	return cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "No such container")
}
