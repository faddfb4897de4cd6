package servers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"
	goredis "github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// Topology is a replicated server: a primary and one streaming standby
// (Postgres streaming replication; a Redis replica), started from the
// local images on two Docker networks of its own, one for replication and
// one for the clients, and the harness's Router in front of the current
// primary. The primary of Postgres runs with synchronous_standby_names =
// '*' and synchronous_commit = on; Redis replicates asynchronously and the
// store decides whether to WAIT. Whether a commit waits for the standby
// is the store's configuration (its variant), as with real deployments
// where it is set per session or per call.
//
// Topology implements nemesis.Cluster: it cuts the standby off (a lagging
// replica), pauses the primary, cuts the primary off a network (docker network disconnect),
// heals, and fails over: fences the primary with SIGKILL, promotes the
// standby (pg_promote, REPLICAOF NO ONE) and routes the clients to it.
// After a failover, Ready starts a new standby from the new primary.
//
// Its containers and networks carry the labels of this package's other
// containers: Close, CloseAll and Reap remove them.
type Topology struct {
	// Servers is the servers' kind.
	Servers Kind
	// Addr is the store address of the router (a DSN for Postgres,
	// host:port for Redis): the current primary, whichever it is.
	Addr string
	// Image is the image the containers run.
	Image string
	// Started is how long starting the topology took: networks, both
	// containers, and the standby streaming (synchronously, for Postgres).
	Started time.Duration

	cli      *client.Client
	logf     func(string, ...any)
	password string
	replNet  string // the replication network's name
	cliNet   string // the clients' network's name
	router   *Router

	mu      sync.Mutex
	seq     int
	primary *node
	standby *node
	old     []*node // fenced primaries, removed by Ready and Close
	cut     map[string]bool
	closed  bool
}

var _ nemesis.Cluster = (*Topology)(nil)

// node is one container of a topology.
type node struct {
	name    string // its alias on the replication network
	srv     *Server
	flt     *Faults
	ip      string // on the clients' network
	lagging bool
}

// topologyReadyTimeout bounds starting a container and its replication.
const topologyReadyTimeout = 90 * time.Second

// StartReplicated starts a replicated topology of kind from the local
// image (Options.Image or IDEM_*_IMAGE when set) and returns once the
// standby streams from the primary. The caller must Close it.
func StartReplicated(ctx context.Context, kind Kind, opts Options) (t *Topology, err error) {
	t0 := time.Now()
	if kind != Postgres && kind != Redis {
		return nil, fmt.Errorf("servers: unknown kind %q (want postgres or redis)", kind)
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cli, err := dockerClient()
	if err != nil {
		return nil, errorf(kind, true, "docker is not usable: fix DOCKER_HOST (%v)", err)
	}
	if err := checkDocker(pctx, cli, kind); err != nil {
		cli.Close()
		return nil, err
	}
	prepare(pctx, cli)
	_, local, env := imageNames(kind)
	img := opts.Image
	if img == "" {
		img = getenv(env, local)
	}
	if !present(pctx, cli, img) {
		cli.Close()
		return nil, errorf(kind, true, "image %s not found: run `make images` (a replicated topology runs the local images)", img)
	}
	pw := make([]byte, 12)
	_, _ = rand.Read(pw)
	t = &Topology{Servers: kind, Image: img, cli: cli, logf: opts.Logf, password: hex.EncodeToString(pw), cut: map[string]bool{}}
	defer func() {
		if err != nil {
			_ = t.Close()
			t = nil
		}
	}()
	n := starts.Add(1)
	for _, name := range []*string{&t.replNet, &t.cliNet} {
		suffix := "repl"
		if name == &t.cliNet {
			suffix = "clients"
		}
		*name = fmt.Sprintf("idemcheck-%s-%d-%s", session, n, suffix)
		if _, err := cli.NetworkCreate(ctx, *name, client.NetworkCreateOptions{Driver: "bridge", Labels: t.labels()}); err != nil {
			return t, fmt.Errorf("create network %s: %w", *name, err)
		}
	}
	rctx, rcancel := context.WithTimeout(ctx, topologyReadyTimeout)
	defer rcancel()
	if t.primary, err = t.startNode(rctx, nil); err != nil {
		return t, err
	}
	if t.router, err = NewRouter(net.JoinHostPort(t.primary.ip, t.port())); err != nil {
		return t, err
	}
	t.Addr = t.storeAddr(t.router.Addr())
	if err = t.addStandby(rctx); err != nil {
		return t, err
	}
	t.Started = time.Since(t0)
	if t.logf != nil {
		t.logf("servers: replicated %s (%s) ready in %s", kind, img, t.Started.Round(time.Millisecond))
	}
	return t, nil
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// labels are the labels of the topology's networks (its containers get
// those of runOnce).
func (t *Topology) labels() map[string]string {
	return map[string]string{LabelManaged: "1", LabelKind: string(t.Servers), LabelSession: session, LabelOwner: owner()}
}

func (t *Topology) port() string {
	if t.Servers == Postgres {
		return "5432"
	}
	return "6379"
}

// storeAddr is the store address of a server at hostport.
func (t *Topology) storeAddr(hostport string) string {
	if t.Servers == Redis {
		return hostport
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", t.password), Host: hostport, Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// String describes the topology without its password.
func (t *Topology) String() string {
	return fmt.Sprintf("replicated %s at %s (primary %s, image %s)", t.Servers, Redact(t.Addr), t.primaryName(), t.Image)
}

func (t *Topology) primaryName() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.primary == nil {
		return "none"
	}
	return t.primary.name
}

// Kind names the servers' kind (nemesis.Cluster).
func (t *Topology) Kind() string { return string(t.Servers) }

// startNode starts a container on both networks: a primary when from is
// nil, else a standby replicating from from. It returns once the server
// answers.
func (t *Topology) startNode(ctx context.Context, from *node) (*node, error) {
	t.mu.Lock()
	t.seq++
	name := "n" + strconv.Itoa(t.seq)
	t.mu.Unlock()
	req := testcontainers.ContainerRequest{
		Image:          t.Image,
		Networks:       []string{t.cliNet, t.replNet},
		NetworkAliases: map[string][]string{t.replNet: {name}},
		Labels: map[string]string{LabelManaged: "1", LabelKind: string(t.Servers), LabelSession: session, LabelOwner: owner(),
			labelStart: session + "-" + strconv.FormatInt(starts.Add(1), 10)},
	}
	switch {
	case t.Servers == Postgres && from == nil:
		req.Env = map[string]string{"POSTGRES_PASSWORD": t.password}
		req.Cmd = []string{"postgres", "-c", "wal_level=replica", "-c", "max_wal_senders=8", "-c", "wal_keep_size=256MB",
			"-c", "synchronous_commit=on", "-c", "fsync=on"}
	case t.Servers == Postgres:
		req.Env = map[string]string{"PGPASSWORD": t.password}
		as := "setpriv --reuid=postgres --regid=postgres --init-groups"
		req.Cmd = []string{"bash", "-c", `d=/var/lib/postgresql/data
until ` + as + ` pg_basebackup -h ` + from.name + ` -U postgres -D "$d" -R -X stream -c fast -w; do
	find "$d" -mindepth 1 -delete; sleep 0.3
done
exec ` + as + ` postgres -D "$d"`}
	case from == nil:
		req.Cmd = []string{"redis-server", "--appendonly", "yes", "--appendfsync", "always"}
	default:
		req.Cmd = []string{"redis-server", "--appendonly", "yes", "--appendfsync", "always", "--replicaof", from.name, "6379"}
	}
	s := &Server{Kind: t.Servers, Source: "container:" + t.Image, Managed: true, Image: t.Image}
	pending := register(s)
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req, Started: true, Logger: logfLogger{t.logf}})
	if ctr != nil {
		s.ctr = ctr
	}
	if err == nil && pending.Load() {
		err = errors.New("interrupted: CloseAll was called while it started")
	}
	if err != nil || !attach(s) {
		unregister(s)
		if ctr != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_ = ctr.Terminate(cctx, testcontainers.StopTimeout(0))
			cancel()
		}
		if err == nil {
			err = errors.New("interrupted: CloseAll was called while it started")
		}
		return nil, errorf(t.Servers, false, "cannot start %s node %s from image %s: %v", t.Servers, name, t.Image, err)
	}
	nd := &node{name: name, srv: s}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("topology closed")
	}
	t.mu.Unlock()
	if err := t.refreshIP(ctx, nd); err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if nd.flt, err = NewFaults(s); err != nil {
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := waitUntil(ctx, func(ctx context.Context) error {
		// Dial first: go-redis logs every failed dial of its own.
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(nd.ip, t.port()))
		if err != nil {
			return err
		}
		_ = c.Close()
		return ping(ctx, s)
	}); err != nil {
		last := lastLogLines(context.WithoutCancel(ctx), ctr)
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, errorf(t.Servers, false, "%s node %s did not answer: %v (container log: %s)", t.Servers, name, err, last)
	}
	if t.Servers == Postgres && from == nil {
		// Replication connections from the replication network, with the password.
		code, out, err := ctr.Exec(ctx, []string{"bash", "-c", `echo "host replication all all scram-sha-256" >> "$PGDATA/pg_hba.conf"`})
		if err == nil && code != 0 {
			b, _ := io.ReadAll(out)
			err = fmt.Errorf("exit %d: %s", code, oneLine(string(b)))
		}
		if err == nil {
			err = pgExec(ctx, s.Addr, `SELECT pg_reload_conf()`)
		}
		if err != nil {
			_ = s.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("postgres node %s: allowing replication: %w", name, err)
		}
	}
	return nd, nil
}

// refreshIP reads the node's address on the clients' network (it changes
// when the node is reconnected) and sets its server's address.
func (t *Topology) refreshIP(ctx context.Context, nd *node) error {
	res, err := t.cli.ContainerInspect(ctx, nd.srv.ctr.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect %s node %s: %w", t.Servers, nd.name, err)
	}
	ns := res.Container.NetworkSettings
	if ns == nil || ns.Networks[t.cliNet] == nil || !ns.Networks[t.cliNet].IPAddress.IsValid() {
		return fmt.Errorf("%s node %s has no address on %s", t.Servers, nd.name, t.cliNet)
	}
	nd.ip = ns.Networks[t.cliNet].IPAddress.String()
	nd.srv.Addr = t.storeAddr(net.JoinHostPort(nd.ip, t.port()))
	return nil
}

// addStandby starts a standby from the primary and waits until it
// streams (synchronously, for Postgres).
func (t *Topology) addStandby(ctx context.Context) error {
	t.mu.Lock()
	p := t.primary
	t.mu.Unlock()
	sb, err := t.startNode(ctx, p)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.standby = sb
	t.mu.Unlock()
	switch t.Servers {
	case Postgres:
		if err := waitUntil(ctx, func(ctx context.Context) error {
			return pgCheck(ctx, p.srv.Addr, `SELECT count(*) > 0 FROM pg_stat_replication WHERE state = 'streaming'`)
		}); err != nil {
			return fmt.Errorf("postgres standby %s does not stream from %s: %w", sb.name, p.name, err)
		}
		if err := pgExec(ctx, p.srv.Addr, `ALTER SYSTEM SET synchronous_standby_names = '*'`); err != nil {
			return err
		}
		if err := pgExec(ctx, p.srv.Addr, `SELECT pg_reload_conf()`); err != nil {
			return err
		}
		if err := waitUntil(ctx, func(ctx context.Context) error {
			return pgCheck(ctx, p.srv.Addr, `SELECT count(*) > 0 FROM pg_stat_replication WHERE sync_state = 'sync'`)
		}); err != nil {
			return fmt.Errorf("postgres standby %s is not synchronous: %w", sb.name, err)
		}
	case Redis:
		if err := waitUntil(ctx, func(ctx context.Context) error {
			info, err := redisInfo(ctx, sb.srv.Addr)
			if err == nil && !strings.Contains(info, "master_link_status:up") {
				err = errors.New("master link not up")
			}
			return err
		}); err != nil {
			return fmt.Errorf("redis replica %s does not replicate %s: %w", sb.name, p.name, err)
		}
	}
	return nil
}

// Close removes the router, every container and both networks.
func (t *Topology) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	nodes := append([]*node(nil), t.old...)
	for _, nd := range []*node{t.primary, t.standby} {
		if nd != nil {
			nodes = append(nodes, nd)
		}
	}
	t.mu.Unlock()
	var errs []error
	if t.router != nil {
		_ = t.router.Close()
	}
	for _, nd := range nodes {
		if nd.flt != nil {
			nd.flt.Close()
		}
		errs = append(errs, nd.srv.Close(ctx))
	}
	for _, n := range []string{t.replNet, t.cliNet} {
		if n == "" {
			continue
		}
		if _, err := t.cli.NetworkRemove(ctx, n, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n, err))
		}
	}
	errs = append(errs, t.cli.Close())
	return errors.Join(errs...)
}

// waitUntil calls f every 100ms until it succeeds or ctx ends.
func waitUntil(ctx context.Context, f func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := f(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if perr := faults.Pause(ctx, 100*time.Millisecond); perr != nil {
			return err
		}
	}
}

// pgExec runs one statement on a new connection.
func pgExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// pgCheck runs a query returning one boolean, and fails unless it is true.
func pgCheck(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	if err := conn.QueryRow(ctx, sql).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not yet: %s", sql)
	}
	return nil
}

// redisInfo returns INFO replication.
func redisInfo(ctx context.Context, addr string) (string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, DisableIdentity: true})
	defer c.Close()
	return c.Info(ctx, "replication").Result()
}
