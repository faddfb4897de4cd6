package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
)

// kindFacts is what this package knows of one kind of server: its images,
// its environment variables, its port, how to start, check and replicate
// it. Everything that differs between the kinds is a field here, so that
// the code that starts, checks and fails servers reads one row of [kinds]
// instead of switching on the kind; pausing, killing and restarting are
// Docker's and the same for every kind.
type kindFacts struct {
	// officialImage is the image testcontainers' module documents (a field
	// of a variable, so that tests can stand a local image in for it
	// without retagging images in a shared daemon).
	officialImage string
	// localImage is the image images/build.sh builds; envImage is the
	// variable that overrides it.
	localImage, envImage string
	// envAddr is the variable that names an existing server.
	envAddr string
	// port is the server's TCP port inside its container.
	port string

	// checkEnv pings a server the environment names; its errors are one
	// line that says what to fix.
	checkEnv func(ctx context.Context, addr string) error
	// ping checks once that the server at a store address answers.
	ping func(ctx context.Context, addr string) error
	// run starts a container from img with testcontainers' module, its
	// waits bounded by timeout, and returns it (nil if none was created)
	// with the store address of its server. A port other than 0 puts the
	// server on the host network (see [hostNetwork]), listening on that
	// loopback port; 0 leaves it on Docker's bridge, its port published
	// as opts say.
	run func(ctx context.Context, img string, timeout time.Duration, port int, opts []testcontainers.ContainerCustomizer) (testcontainers.Container, string, error)

	// storeAddr is the store address of a replicated node at hostport,
	// password being the topology's.
	storeAddr func(hostport, password string) string
	// primary is the environment and command of a topology's first node.
	primary func(password string) (env map[string]string, cmd []string)
	// standby is those of a node that replicates from the node whose alias
	// on the replication network is from.
	standby func(from, password string) (env map[string]string, cmd []string)
	// allowReplication, when set, lets standbys replicate from a new
	// primary once it answers.
	allowReplication func(ctx context.Context, ctr testcontainers.Container, addr string) error
	// streaming waits until the standby sb replicates from the primary p
	// as the topology's doc says (synchronously, for Postgres).
	streaming func(ctx context.Context, p, sb *node) error
	// promote makes a standby the primary, in one attempt.
	promote func(ctx context.Context, addr string) error
}

// The servers' ports inside their containers.
const (
	postgresPort = "5432"
	redisPort    = "6379"
)

// kinds holds one row of facts per kind of server this package provisions.
var kinds = map[Kind]kindFacts{
	Postgres: {
		officialImage:    OfficialPostgresImage,
		localImage:       LocalPostgresImage,
		envImage:         EnvPostgresImage,
		envAddr:          EnvPostgresDSN,
		port:             postgresPort,
		checkEnv:         pingPostgres,
		ping:             pgPing,
		run:              runPostgres,
		storeAddr:        postgresAddr,
		primary:          postgresPrimary,
		standby:          postgresStandby,
		allowReplication: postgresAllowReplication,
		streaming:        postgresStreaming,
		// Idempotent: an attempt whose wait the caller cut short (a
		// loaded machine) may have promoted the standby all the same,
		// and pg_promote on a primary is an error, "recovery is not in
		// progress", which no retry ends (a failover waited 18 minutes).
		promote: func(ctx context.Context, addr string) error {
			return pgCheck(ctx, addr, `SELECT CASE WHEN pg_is_in_recovery() THEN pg_promote(true, 60) ELSE true END`)
		},
	},
	Redis: {
		officialImage: OfficialRedisImage,
		localImage:    LocalRedisImage,
		envImage:      EnvRedisImage,
		envAddr:       EnvRedisAddr,
		port:          redisPort,
		checkEnv:      pingRedis,
		ping:          redisPing,
		run:           runRedis,
		storeAddr:     func(hostport, _ string) string { return hostport },
		primary: func(string) (map[string]string, []string) {
			return nil, redisReplicated()
		},
		standby: func(from, _ string) (map[string]string, []string) {
			return nil, append(redisReplicated(), "--replicaof", from, redisPort)
		},
		streaming: redisStreaming,
		promote: func(ctx context.Context, addr string) error {
			c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, DisableIdentity: true})
			defer c.Close()
			return c.Do(ctx, "REPLICAOF", "NO", "ONE").Err()
		},
	},
}

// Known reports whether this package provisions servers of kind k.
func (k Kind) Known() bool {
	_, ok := kinds[k]
	return ok
}

// unknownKind is the error of Start and StartReplicated for a kind not in
// [kinds].
func unknownKind(kind Kind) error {
	var names []string
	for k := range kinds {
		names = append(names, string(k))
	}
	slices.Sort(names)
	return fmt.Errorf("servers: unknown kind %q (want %s)", kind, strings.Join(names, " or "))
}

// postgresReady matches the log of a Postgres container whose real server
// is up. The official image prints the ready line twice on a fresh data
// directory (a temporary server first, on the unix socket only); the local
// one (images/postgres-entrypoint.sh) prints it once when it sets up the
// cluster it carries in single-user mode, twice otherwise. So: two ready
// lines, or one after the entrypoint's end of initialisation (or its word
// that it skipped it). Docker logs stdout and stderr each through a copier
// of its own, and under load a marker on stdout was logged after the
// server's ready line on stderr (a fresh-clone `make test` waited its
// whole minute for it): the local image prints its marker on stderr, and
// the official image, which prints it on stdout, is matched by its two
// ready lines.
const postgresReady = `(?s)database system is ready to accept connections.*database system is ready to accept connections` +
	`|(PostgreSQL init process complete|Skipping initialization).*database system is ready to accept connections`

// runPostgres runs a Postgres container. The module's own wait
// (tcpostgres.BasicWaitStrategies) gives initdb 60 s, whatever the start
// timeout: on a loaded machine (a soak beside CPU hogs) initdb took
// longer, and it counts two ready lines, where the local image may print
// one ([postgresReady]). Waits of the same kind, bounded by the start
// timeout instead, and the port tried from outside only
// (SkipInternalCheck): the log line already says the server listens, and
// the check inside the container is a process started there (docker
// exec), which costs more than the rest of the wait on a machine where
// starting a process is slow. On the host network (port not 0) the port
// is tried once the log says it listens, by the caller ([reachable]).
//
// Passwords are stored and checked as md5 (password_encryption, which
// the entrypoint's pg_hba line follows), not SCRAM: SCRAM's key
// derivation, on the server and in the client, doubled the CPU a session
// costs (12 ms against 6 in pgbench in the container), and a check opens
// hundreds of sessions. A wrong password is still refused; how a store
// logs in is not what idemcheck judges.
func runPostgres(ctx context.Context, img string, timeout time.Duration, port int, opts []testcontainers.ContainerCustomizer) (testcontainers.Container, string, error) {
	args := []string{"-c", "password_encryption=md5"}
	waits := []wait.Strategy{wait.ForLog(postgresReady).AsRegexp().WithStartupTimeout(timeout).WithPollInterval(startPoll)}
	if port != 0 {
		// On the host network: its own loopback port, and nothing else,
		// and a password even there (loopbackHBA).
		args = append(args, "-c", "port="+strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1", "-c", "hba_file="+loopbackHBAPath)
		opts = append(opts, onHostNetwork(), testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader: strings.NewReader(loopbackHBA), ContainerFilePath: loopbackHBAPath, FileMode: 0o644}))
	} else {
		waits = append(waits, wait.ForListeningPort(postgresPort+"/tcp").WithStartupTimeout(timeout).SkipInternalCheck().WithPollInterval(startPoll))
	}
	pc, err := tcpostgres.Run(ctx, img, append(opts, testcontainers.WithCmdArgs(args...), testcontainers.WithWaitStrategyAndDeadline(timeout, waits...))...)
	if pc == nil {
		return nil, "", err
	}
	if err != nil {
		return pc, "", err
	}
	addr, err := pc.ConnectionString(ctx, "sslmode=disable")
	if err != nil || port == 0 {
		return pc, addr, err
	}
	// The module names the container's port, which the host network
	// does not map: the server listens on port.
	u, err := url.Parse(addr)
	if err != nil {
		return pc, "", err
	}
	u.Host = onLoopback(port)
	return pc, u.String(), nil
}

// loopbackHBA is the client authentication of a Postgres on the host
// network, at loopbackHBAPath in its container. initdb's own trusts any
// connection from 127.0.0.1, which is where every client of a server on
// the host network comes from (on the bridge they come from its
// gateway): a wrong password would be let in, and any user of the
// machine too. Here only the container's own socket is trusted (the
// entrypoint's setup), and every TCP client gives the password.
const (
	loopbackHBA     = "local all all trust\nhost all all all md5\n"
	loopbackHBAPath = "/etc/idemcheck-pg_hba.conf"
)

// startPoll is how often a container's start is looked at (its log, its
// port): testcontainers' 100 ms lost 50 ms on average of each start,
// which is on a check run's critical path, for a look that costs Docker
// little.
const startPoll = 20 * time.Millisecond

// runRedis runs a Redis container that makes every write durable before
// it answers (appendfsync always).
func runRedis(ctx context.Context, img string, timeout time.Duration, port int, opts []testcontainers.ContainerCustomizer) (testcontainers.Container, string, error) {
	cmd := redisServer()
	// The module waits 10 s for the port; the start timeout here, and
	// from outside only, as runPostgres does.
	waits := []wait.Strategy{wait.ForLog("* Ready to accept connections").WithStartupTimeout(timeout).WithPollInterval(startPoll)}
	if port != 0 {
		cmd = append(cmd, "--port", strconv.Itoa(port), "--bind", "127.0.0.1")
		opts = append(opts, onHostNetwork())
	} else {
		waits = append([]wait.Strategy{wait.ForListeningPort(redisPort + "/tcp").WithStartupTimeout(timeout).SkipInternalCheck().WithPollInterval(startPoll)}, waits...)
	}
	rc, err := tcredis.Run(ctx, img, append(opts, testcontainers.WithCmd(cmd...), testcontainers.WithWaitStrategyAndDeadline(timeout, waits...))...)
	if rc == nil {
		return nil, "", err
	}
	if err != nil {
		return rc, "", err
	}
	if port != 0 {
		return rc, onLoopback(port), nil
	}
	ep, err := rc.ConnectionString(ctx)
	return rc, redisAddr(ep), err
}

// redisServer is the command of every Redis container: an append-only
// file synced before each answer.
func redisServer() []string {
	return []string{"redis-server", "--appendonly", "yes", "--appendfsync", "always"}
}

// redisReplicated is the command of a replicated Redis node, primary or
// standby (a standby is promoted at a failover): redisServer, and a full
// sync sent at once, not after the default 5 s that a diskless sync waits
// for more replicas to join it (repl-diskless-sync-delay, Redis 2.8.18 and
// later; a topology's Redis setup 8.5-9.7 s to 3.5 s).
func redisReplicated() []string {
	return append(redisServer(), "--repl-diskless-sync-delay", "0")
}

// postgresAddr is the DSN of a replicated node's postgres database.
func postgresAddr(hostport, password string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", password), Host: hostport, Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// postgresPrimary is a primary that keeps WAL for its standbys and
// commits once its synchronous standbys (none until addStandby names
// them) have the commit.
func postgresPrimary(password string) (map[string]string, []string) {
	return map[string]string{"POSTGRES_PASSWORD": password},
		[]string{"postgres", "-c", "wal_level=replica", "-c", "max_wal_senders=8", "-c", "wal_keep_size=256MB",
			"-c", "synchronous_commit=on", "-c", "fsync=on"}
}

// postgresStandby copies the primary (pg_basebackup, retried until the
// primary lets it) into an emptied data directory (the image's holds the
// cluster it made at build time) and streams from it.
func postgresStandby(from, password string) (map[string]string, []string) {
	as := "setpriv --reuid=postgres --regid=postgres --init-groups"
	return map[string]string{"PGPASSWORD": password}, []string{"bash", "-c", `d=/var/lib/postgresql/data
find "$d" -mindepth 1 -delete
until ` + as + ` pg_basebackup -h ` + from + ` -U postgres -D "$d" -R -X stream -c fast -w; do
	find "$d" -mindepth 1 -delete; sleep 0.3
done
exec ` + as + ` postgres -D "$d"`}
}

// postgresAllowReplication lets replication connections in from the
// replication network, with the password.
func postgresAllowReplication(ctx context.Context, ctr testcontainers.Container, addr string) error {
	code, out, err := ctr.Exec(ctx, []string{"bash", "-c", `echo "host replication all all scram-sha-256" >> "$PGDATA/pg_hba.conf"`})
	if err == nil && code != 0 {
		b, _ := io.ReadAll(out)
		err = fmt.Errorf("exit %d: %s", code, oneLine(string(b)))
	}
	if err == nil {
		err = pgExec(ctx, addr, `SELECT pg_reload_conf()`)
	}
	return err
}

// postgresStreaming waits until sb streams from p, then makes it p's
// synchronous standby and waits until it is, and until it has flushed all
// of p's WAL written so far.
//
// The last wait closes a window in which a failover to sb could lose
// acknowledged commits: a promoted standby runs without a synchronous
// standby until the next one is made (its configuration came from a base
// backup taken before its own primary named one), so the commits
// acknowledged in that window are on the new primary alone. Once the next
// standby is synchronous, only new commits wait for it, and one not yet
// caught up with the window would lose them. (The correct replicated store
// had a done key claimed again after repeated failovers, once in a long
// hunt and once in the demo test; TestReplicatedFailover's second failover
// has not lost a claim with or without this wait: the checkpoint below
// closes the window that is the likelier cause.)
// ownSetup says, of a replica the harness could not set up, whose the
// failure is: a connect timeout on a loaded machine read as a
// replication setting of the store's gone wrong.
const ownSetup = "the harness's own setup of its replica, not the store under test; on a loaded machine, run it again"

func postgresStreaming(ctx context.Context, p, sb *node) error {
	if err := waitUntil(ctx, func(ctx context.Context) error {
		return pgCheck(ctx, p.srv.Addr, `SELECT count(*) > 0 FROM pg_stat_replication WHERE state = 'streaming'`)
	}); err != nil {
		return fmt.Errorf("postgres standby %s does not stream from %s (%s): %w", sb.name, p.name, ownSetup, err)
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
		return fmt.Errorf("postgres standby %s did not become synchronous (%s): %w", sb.name, ownSetup, err)
	}
	// A new session sees the standby as synchronous once the postmaster
	// has reloaded, but a commit waits for it only once the checkpointer
	// has reloaded too: it sets the flag every commit reads
	// (SyncRepUpdateSyncStandbysDefined), and until then commits return
	// without waiting, so a failover loses what they acknowledged. The
	// correct replicated store lost a done key that way (the demo test
	// beside a loaded suite: its claim and save committed in 10 to 20 ms
	// while the standby was cut off). With the checkpointer stopped, a
	// session sees the standby as sync at once, and a commit with the
	// standby cut off returns at once (TestSynchronousStandbyWaitsForTheCheckpointer).
	// The checkpointer handles a pending reload before it starts a
	// checkpoint, and CHECKPOINT waits for one that starts after it was
	// asked for: once it returns, commits wait.
	if err := waitUntil(ctx, func(ctx context.Context) error {
		return pgExec(ctx, p.srv.Addr, `CHECKPOINT`)
	}); err != nil {
		return fmt.Errorf("postgres primary %s: a checkpoint after naming its synchronous standby: %w", p.name, err)
	}
	// Every commit acknowledged before the standby became synchronous
	// lies at or before the primary's WAL position read now (read once: a
	// primary that keeps writing moves it on, and a standby chasing it
	// might never be seen to reach it).
	var lsn string
	if err := waitUntil(ctx, func(ctx context.Context) error {
		var err error
		lsn, err = pgString(ctx, p.srv.Addr, `SELECT pg_current_wal_lsn()::text`)
		return err
	}); err != nil {
		return err
	}
	if err := waitUntil(ctx, func(ctx context.Context) error {
		return pgCheck(ctx, p.srv.Addr, `SELECT count(*) > 0 FROM pg_stat_replication
			WHERE sync_state = 'sync' AND flush_lsn >= '`+lsn+`'::pg_lsn`)
	}); err != nil {
		return fmt.Errorf("postgres standby %s has not caught up with %s: %w", sb.name, p.name, err)
	}
	return nil
}

// redisStreaming waits until the replica sb's link to its master p is up
// and the master has seen sb acknowledge a write: a WAIT for one replica
// after a write on p returns 1. The replica reports its link up once it
// has loaded the master's snapshot, which can be before the master counts
// it online; a store that WAITs for the replica (the correct replicated
// one) would time out on its first calls in that gap.
func redisStreaming(ctx context.Context, p, sb *node) error {
	if err := waitUntil(ctx, func(ctx context.Context) error {
		info, err := redisInfo(ctx, sb.srv.Addr)
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			err = errors.New("master link not up")
		}
		return err
	}); err != nil {
		return fmt.Errorf("redis replica %s does not replicate %s: %w", sb.name, p.name, err)
	}
	if err := waitUntil(ctx, func(ctx context.Context) error {
		c := goredis.NewClient(&goredis.Options{Addr: p.srv.Addr, MaxRetries: -1, PoolSize: 1, DisableIdentity: true})
		defer c.Close()
		if err := c.Set(ctx, "idemcheck:replica-probe", sb.name, time.Minute).Err(); err != nil {
			return err
		}
		n, err := c.Do(ctx, "WAIT", 1, 1000).Int64()
		if err == nil && n < 1 {
			err = errors.New("no replica acknowledged a write within 1s")
		}
		return err
	}); err != nil {
		return fmt.Errorf("redis replica %s does not acknowledge %s's writes: %w", sb.name, p.name, err)
	}
	return nil
}

// pgPing connects to dsn and pings the server once.
func pgPing(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
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

// pgString runs a query returning one text value, and returns it.
func pgString(ctx context.Context, dsn, sql string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	err = conn.QueryRow(ctx, sql).Scan(&v)
	return v, err
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

// redisPing pings the Redis server at addr once.
func redisPing(ctx context.Context, addr string) error {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, DisableIdentity: true})
	defer c.Close()
	return c.Ping(ctx).Err()
}

// redisInfo returns INFO replication.
func redisInfo(ctx context.Context, addr string) (string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, DisableIdentity: true})
	defer c.Close()
	return c.Info(ctx, "replication").Result()
}
