package servers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/client"
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
	// synced: the standby streams as the topology's doc says (its kind's
	// streaming returned). Until then a fault phase must not begin: a
	// Postgres primary whose standby's wait was cut short may not wait
	// for it on commit, and a failover then loses what it acknowledged.
	synced bool
}

// topologyReadyTimeout bounds starting a container and its replication.
// At load 20 (make test beside another job on 2 cores) Docker took more
// than 90 s to start the second node of a topology, and a demo ended as
// a setup error.
const topologyReadyTimeout = 180 * time.Second

// StartReplicated starts a replicated topology of kind from the local
// image (Options.Image or IDEM_*_IMAGE when set) and returns once the
// standby streams from the primary. The caller must Close it.
func StartReplicated(ctx context.Context, kind Kind, opts Options) (t *Topology, err error) {
	t0 := time.Now()
	facts, ok := kinds[kind]
	if !ok {
		return nil, unknownKind(kind)
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
	img := opts.Image
	if img == "" {
		img = getenv(facts.envImage, facts.localImage)
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

func (t *Topology) port() string { return kinds[t.Servers].port }

// storeAddr is the store address of a server at hostport.
func (t *Topology) storeAddr(hostport string) string {
	return kinds[t.Servers].storeAddr(hostport, t.password)
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
	if from == nil {
		req.Env, req.Cmd = kinds[t.Servers].primary(t.password)
	} else {
		req.Env, req.Cmd = kinds[t.Servers].standby(from.name, t.password)
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
	if allow := kinds[t.Servers].allowReplication; allow != nil && from == nil {
		if err := allow(ctx, ctr, s.Addr); err != nil {
			_ = s.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("%s node %s: allowing replication: %w", t.Servers, name, err)
		}
	}
	return nd, nil
}

// refreshIP reads the node's address on the clients' network (it changes
// when the node is reconnected) and sets its server's address.
func (t *Topology) refreshIP(ctx context.Context, nd *node) error {
	res, err := docker(ctx, "inspect", func(ctx context.Context) (client.ContainerInspectResult, error) {
		return t.cli.ContainerInspect(ctx, nd.srv.ctr.GetContainerID(), client.ContainerInspectOptions{})
	})
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
	sb, p, err := t.startStandby(ctx)
	if err != nil {
		return err
	}
	return t.syncStandby(ctx, p, sb)
}

// startStandby starts a standby from the primary and makes it the
// topology's, not yet synced: Close removes it whatever happens next.
func (t *Topology) startStandby(ctx context.Context) (sb, p *node, err error) {
	t.mu.Lock()
	p = t.primary
	t.mu.Unlock()
	if sb, err = t.startNode(ctx, p); err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	t.standby = sb
	t.mu.Unlock()
	return sb, p, nil
}

// syncStandby waits until the standby sb streams from the primary p as
// the topology's doc says, and marks it synced.
func (t *Topology) syncStandby(ctx context.Context, p, sb *node) error {
	if err := kinds[t.Servers].streaming(ctx, p, sb); err != nil {
		return err
	}
	t.mu.Lock()
	sb.synced = true
	t.mu.Unlock()
	return nil
}

// dropStandby removes the standby sb, if it is still the topology's.
func (t *Topology) dropStandby(ctx context.Context, sb *node) {
	t.mu.Lock()
	if t.standby == sb {
		t.standby = nil
	}
	t.mu.Unlock()
	sb.flt.Close()
	_ = sb.srv.Close(context.WithoutCancel(ctx))
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
