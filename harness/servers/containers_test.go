package servers

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// volumesOf names the volumes of s's container (its data directory, a
// VOLUME of the image), after checking it has one.
func volumesOf(t *testing.T, s *Server) []string {
	t.Helper()
	info, err := s.Container().Inspect(dockerCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range info.Mounts {
		if m.Type == "volume" {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		t.Errorf("the %s container has no volume: its data is written through the storage driver", s.Kind)
	}
	return names
}

// volumesGone fails the test if any of the volumes is still there: a
// server's data must leave the disk with its container.
func volumesGone(t *testing.T, names []string) {
	t.Helper()
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, n := range names {
		if _, err := cli.VolumeInspect(dockerCtx(t), n, client.VolumeInspectOptions{}); err == nil {
			t.Errorf("volume %s left behind by the closed server", n)
		}
	}
}

// TestPostgresImageOffTheDefaultContract: the local image uses its
// build-time cluster only for the default contract; another superuser, a
// database of its own and initdb arguments get a real initdb, as with the
// official image, and a restart starts that cluster as it is.
func TestPostgresImageOffTheDefaultContract(t *testing.T) {
	ctx := dockerReady(t)
	// A real initdb beside a loaded suite took more than 60 s in one CI
	// rehearsal and more than 90 s in another (5.7 s idle): the bound is
	// the harness's own start timeout (dockerReady's context outlasts
	// it), and initdb skips its fsyncs (--no-sync: what is tested is that
	// it ran, not that its files survive a power cut).
	ctr, addr, err := runPostgres(ctx, getenv(EnvPostgresImage, LocalPostgresImage), defaultStartTimeout, 0, []testcontainers.ContainerCustomizer{
		testcontainers.WithLabels(map[string]string{LabelManaged: "1", LabelSession: session, LabelOwner: owner()}),
		tcpostgres.WithUsername("alice"), tcpostgres.WithPassword("s3cret"), tcpostgres.WithDatabase("shop"),
		testcontainers.WithEnv(map[string]string{"POSTGRES_INITDB_ARGS": "--data-checksums --no-sync"}),
	})
	if ctr != nil {
		defer func() { _ = ctr.Terminate(context.WithoutCancel(ctx)) }()
	}
	if err != nil {
		if ctr != nil {
			err = fmt.Errorf("%w (container log: %s)", err, lastLogLines(context.WithoutCancel(ctx), ctr))
		}
		t.Fatal(err)
	}
	ask := func(dsn string) (user, db, checksums string) {
		t.Helper()
		conn, err := connectRetry(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT current_user, current_database(), current_setting('data_checksums')").Scan(&user, &db, &checksums); err != nil {
			t.Fatal(err)
		}
		return user, db, checksums
	}
	if u, d, c := ask(addr); u != "alice" || d != "shop" || c != "on" {
		t.Errorf("got user %q, database %q, data_checksums %s: want alice, shop, on (a real initdb)", u, d, c)
	}
	timeout := 5 * time.Second
	if err := ctr.Stop(ctx, &timeout); err != nil {
		t.Fatal(err)
	}
	if err := ctr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr2, err := ctr.(*tcpostgres.PostgresContainer).ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if u, d, _ := ask(addr2); u != "alice" || d != "shop" {
		t.Errorf("after a restart: user %q, database %q", u, d)
	}
}

func TestPostgresContainer(t *testing.T) {
	clearEnv(t)
	t0 := time.Now()
	s := ForTest(t, Postgres)
	t.Logf("Start(postgres) took %s: %s", time.Since(t0).Round(time.Millisecond), s)
	if !s.Managed || s.Container() == nil || !strings.HasPrefix(s.Source, "container:") {
		t.Fatalf("want a managed container, got %+v", s)
	}
	if strings.Contains(s.String(), ":postgres@") {
		t.Errorf("String() shows the password: %s", s)
	}
	if u, err := url.Parse(s.Addr); err != nil || u.Hostname() != "127.0.0.1" {
		t.Errorf("Addr %q: want a DSN on 127.0.0.1 (%v)", Redact(s.Addr), err)
	}
	ctx := dockerCtx(t)
	conn, err := pgx.Connect(ctx, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	var sum int
	var user string
	if err := conn.QueryRow(ctx, "SELECT 1+1, current_user").Scan(&sum, &user); err != nil {
		t.Fatal(err)
	}
	if sum != 2 || user != "postgres" {
		t.Errorf("got %d %q", sum, user)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE k (id text PRIMARY KEY); INSERT INTO k VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	// The cluster made at build time got the password: any other is refused.
	if u, err := url.Parse(s.Addr); err == nil {
		u.User = url.UserPassword("postgres", "not-the-password")
		if c, err := pgx.Connect(ctx, u.String()); err == nil {
			_ = c.Close(ctx)
			t.Error("a wrong password was let in")
		} else if !strings.Contains(err.Error(), "28P01") {
			t.Errorf("a wrong password: want SQLSTATE 28P01, got %v", err)
		}
	}

	// A restarted container keeps its address and its data.
	restart(t, s)
	conn, err = connectRetry(ctx, s.Addr)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	var id string
	if err := conn.QueryRow(ctx, "SELECT id FROM k").Scan(&id); err != nil || id != "a" {
		t.Fatalf("after restart: %q, %v", id, err)
	}
	_ = conn.Close(ctx)

	if n := ourContainers(t); n != 1 {
		t.Errorf("%d containers of ours while one server runs, want 1", n)
	}
	vols := volumesOf(t, s)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := ourContainers(t); n != 0 {
		t.Errorf("%d containers left after Close", n)
	}
	volumesGone(t, vols)
}

func TestRedisContainer(t *testing.T) {
	clearEnv(t)
	t0 := time.Now()
	s := ForTest(t, Redis)
	t.Logf("Start(redis) took %s: %s", time.Since(t0).Round(time.Millisecond), s)
	if !s.Managed || s.Container() == nil {
		t.Fatalf("want a managed container, got %+v", s)
	}
	if h, _, err := net.SplitHostPort(s.Addr); err != nil || h != "127.0.0.1" {
		t.Fatalf("Addr %q: want 127.0.0.1:port (%v)", s.Addr, err)
	}
	ctx := dockerCtx(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v", v, err)
	}
	for param, want := range map[string]string{"appendonly": "yes", "appendfsync": "always", "protected-mode": "no"} {
		got, err := c.ConfigGet(ctx, param).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got[param] != want {
			t.Errorf("CONFIG GET %s = %q, want %q", param, got[param], want)
		}
	}
	// Acknowledged writes survive a kill (appendfsync always) and the
	// address survives a restart.
	if err := c.Set(ctx, "durable", "yes", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if err := s.Container().Stop(ctx, new(time.Duration)); err != nil { // SIGTERM, then SIGKILL at once
		t.Fatal(err)
	}
	if err := s.Container().Start(ctx); err != nil {
		t.Fatal(err)
	}
	c = redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	var v string
	var err error
	// The restarted server may not listen yet when Start returns: under
	// a loaded suite it did not within 10 s (make test, 2026-12-06,
	// evening).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if v, err = c.Get(ctx, "durable").Result(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || v != "yes" {
		t.Fatalf("after restart: GET durable = %q, %v", v, err)
	}
	_ = c.Close()
	vols := volumesOf(t, s)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ourContainers(t); n != 0 {
		t.Errorf("%d containers left after Close", n)
	}
	volumesGone(t, vols)
}

// TestPostgresImageQuotesWhatItSetsUp: the cluster made at build time is
// set up in single-user mode, where the password and the database name
// go into SQL text: a password and a name with quotes in them must come
// out as given, and another password must be refused.
func TestPostgresImageQuotesWhatItSetsUp(t *testing.T) {
	ctx := dockerReady(t)
	const password, db = `it's a "pass\word`, `the "shop's" db`
	ctr, _, err := runPostgres(ctx, getenv(EnvPostgresImage, LocalPostgresImage), defaultStartTimeout, 0, []testcontainers.ContainerCustomizer{
		testcontainers.WithLabels(map[string]string{LabelManaged: "1", LabelSession: session, LabelOwner: owner()}),
		tcpostgres.WithPassword(password), tcpostgres.WithDatabase(db),
	})
	if ctr != nil {
		defer func() { _ = ctr.Terminate(context.WithoutCancel(ctx)) }()
	}
	if err != nil {
		t.Fatal(err)
	}
	// The module's connection string does not escape what it holds.
	hostPort, err := ctr.PortEndpoint(ctx, postgresPort+"/tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	u := &url.URL{Scheme: "postgres", User: url.UserPassword("postgres", password), Host: hostPort, Path: "/" + db, RawQuery: "sslmode=disable"}
	conn, err := connectRetry(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&got); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if got != db {
		t.Errorf("database %q, want %q", got, db)
	}
	u.User = url.UserPassword("postgres", password+"x")
	if c, err := pgx.Connect(ctx, u.String()); err == nil {
		_ = c.Close(ctx)
		t.Error("a wrong password was let in")
	} else if !strings.Contains(err.Error(), "28P01") {
		t.Errorf("a wrong password: want SQLSTATE 28P01, got %v", err)
	}
}

// dockerReady prepares a test that runs a container itself, as Start
// does (testcontainers set up for this machine: no Ryuk without its
// image), with no server named by the environment; its context ends
// with the test, a minute past the start timeout at most (a real initdb
// beside a loaded suite outlasted a 90 s context).
func dockerReady(t *testing.T) context.Context {
	t.Helper()
	clearEnv(t)
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), defaultStartTimeout+time.Minute)
	t.Cleanup(cancel)
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	prepare(ctx, cli)
	return ctx
}
