package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// clearEnv makes Start ignore any server named by the developer's environment.
func clearEnv(t *testing.T) {
	t.Setenv(EnvPostgresDSN, "")
	t.Setenv(EnvRedisAddr, "")
}

// ourContainers counts this process's containers (running or not).
func ourContainers(t *testing.T) int {
	t.Helper()
	return sessionContainers(t, SessionID())
}

// dockerCtx bounds a test's Docker calls and the server calls around
// them: a guard against a hang, not a timing. On a loaded two-core guest
// (make test: load 22) starting a Postgres container took 16 s, and a
// container's stop, restart and removal together passed 15 s, so the
// bound is well above any wait the tests mean.
func dockerCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestEnvServers checks that a server named in the environment is used as is
// (no second container) and that a broken one gives a one-line error in time.
func TestEnvServers(t *testing.T) {
	clearEnv(t)
	pg := ForTestOptions(t, Postgres, Options{Container: true})
	rd := ForTestOptions(t, Redis, Options{Container: true})
	before := ourContainers(t)

	t.Run("postgres dsn", func(t *testing.T) {
		t.Setenv(EnvPostgresDSN, pg.Addr)
		s, err := Start(dockerCtx(t), Postgres, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Managed || s.Container() != nil || s.Source != "env" || s.Addr != pg.Addr {
			t.Errorf("want the env server as is, got %+v", s)
		}
		if err := s.Close(dockerCtx(t)); err != nil {
			t.Error(err)
		}
	})
	t.Run("redis addr", func(t *testing.T) {
		t.Setenv(EnvRedisAddr, rd.Addr)
		s, err := Start(dockerCtx(t), Redis, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Managed || s.Source != "env" || s.Addr != rd.Addr {
			t.Errorf("want the env server as is, got %+v", s)
		}
	})
	if after := ourContainers(t); after != before {
		t.Errorf("env servers started containers: %d before, %d after", before, after)
	}

	const secret = "hunter2-not-the-password"
	u, _ := url.Parse(pg.Addr)
	u.User = url.UserPassword("postgres", secret)
	wrongPassword := u.String()
	u.User = url.UserPassword("nobody", secret)
	wrongUser := u.String()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	free := strconv.Itoa(port)

	cases := []struct {
		name, env, value, want string
	}{
		{"wrong password", EnvPostgresDSN, wrongPassword, "authentication failed for user postgres at 127.0.0.1:" + u.Port() + ": check IDEM_POSTGRES_DSN"},
		{"wrong user", EnvPostgresDSN, wrongUser, "authentication failed for user nobody"},
		{"refused", EnvPostgresDSN, "postgres://postgres:" + secret + "@127.0.0.1:" + free + "/postgres", "cannot reach postgres at 127.0.0.1:" + free + ": connect: connection refused"},
		{"keyword dsn refused", EnvPostgresDSN, "host=127.0.0.1 port=" + free + " user=postgres password=" + secret, "cannot reach postgres at 127.0.0.1:" + free + ": connect: connection refused"},
		{"bad dsn", EnvPostgresDSN, "postgres://postgres:" + secret + "@127.0.0.1:notaport/x", "IDEM_POSTGRES_DSN is not a valid postgres DSN"},
		{"redis refused", EnvRedisAddr, "127.0.0.1:" + free, "cannot reach redis at 127.0.0.1:" + free + ": connect: connection refused"},
		{"redis url", EnvRedisAddr, "redis://127.0.0.1:" + free, "IDEM_REDIS_ADDR must be host:port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			kind := Postgres
			if tc.env == EnvRedisAddr {
				kind = Redis
			}
			t0 := time.Now()
			s, err := Start(context.Background(), kind, Options{})
			took := time.Since(t0)
			if err == nil {
				t.Fatalf("Start succeeded: %v", s)
			}
			msg := err.Error()
			t.Logf("%s (%s)", msg, took.Round(time.Millisecond))
			if took > 15*time.Second {
				t.Errorf("took %s, want < 15s", took)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, secret) {
				t.Errorf("error is not one line without the password: %q", msg)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("a broken env server must not read as unavailable (tests would skip)")
			}
		})
	}
}

// restart stops and starts a managed server's container.
func restart(t *testing.T, s *Server) {
	t.Helper()
	ctx := dockerCtx(t)
	timeout := 5 * time.Second
	if err := s.Container().Stop(ctx, &timeout); err != nil {
		t.Fatal(err)
	}
	if err := s.Container().Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// connectRetry connects to Postgres, retrying while it starts up.
func connectRetry(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err // no retry makes a malformed address well formed
	}
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestUnavailable checks the errors for a missing Docker and a missing image.
func TestUnavailable(t *testing.T) {
	clearEnv(t)
	t.Run("no docker", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
		t0 := time.Now()
		_, err := Start(context.Background(), Postgres, Options{})
		if err == nil {
			t.Fatal("Start succeeded without Docker")
		}
		t.Logf("%v (%s)", err, time.Since(t0).Round(time.Millisecond))
		if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "docker is not running: start it, or set IDEM_POSTGRES_DSN") {
			t.Errorf("got %v", err)
		}
		if time.Since(t0) > 15*time.Second {
			t.Errorf("took %s", time.Since(t0))
		}
	})
	t.Run("no image", func(t *testing.T) {
		requireDocker(t)
		t.Setenv(EnvRedisImage, "idemcheck/no-such-image:0")
		t0 := time.Now()
		_, err := Start(context.Background(), Redis, Options{})
		if err == nil {
			t.Fatal("Start succeeded without the image")
		}
		t.Logf("%v (%s)", err, time.Since(t0).Round(time.Millisecond))
		want := "image idemcheck/no-such-image:0 not found: run `make images`, or set IDEM_REDIS_ADDR"
		if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("got %v, want prefix %q", err, want)
		}
		if time.Since(t0) > 15*time.Second {
			t.Errorf("took %s", time.Since(t0))
		}
		if n := ourContainers(t); n != 0 {
			t.Errorf("%d containers left", n)
		}
	})
}

// requireDocker skips (or fails under IDEM_REQUIRE_SERVERS=1) without Docker.
func requireDocker(t *testing.T) {
	t.Helper()
	cli, err := dockerClient()
	if err == nil {
		defer cli.Close()
		err = checkDocker(dockerCtx(t), cli, Postgres)
	}
	if err != nil {
		skipOrFail(t, "%v", err)
	}
}

// skipOrFail skips the test for a missing prerequisite, or fails it when
// servers are required (CI): a missing server must not pass as a skip.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// TestCloseAllAndReap covers the signal-handler path and leftovers of killed runs.
func TestCloseAllAndReap(t *testing.T) {
	clearEnv(t)
	s := ForTest(t, Redis)
	if err := CloseAll(dockerCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := ourContainers(t); n != 0 {
		t.Errorf("%d containers left after CloseAll", n)
	}
	if err := s.Close(dockerCtx(t)); err != nil {
		t.Errorf("Close after CloseAll: %v", err)
	}

	// A leftover from a killed run on this host, and a container of a live
	// process (this one, another session): Reap removes only the first.
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := dockerCtx(t)
	host, _ := os.Hostname()
	mk := func(ownerLabel string) string {
		res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config: &container.Config{
				Image:  s.Image,
				Labels: map[string]string{LabelManaged: "1", LabelSession: "test-" + ownerLabel, LabelOwner: ownerLabel},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = cli.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		})
		return res.ID
	}
	live := mk(owner())
	// At least the dead owner's: a run killed earlier on this machine (a
	// test binary past its timeout) may have left its own, which are
	// leftovers too. Another process's Reap (a test package starting its
	// server beside this one, as make test runs them) may remove it
	// first: then the dead owner's container is gone, and this Reap is
	// tried again on another.
	var dead string
	for try := 1; ; try++ {
		dead = mk(url.PathEscape(host) + "/999999999/" + strconv.Itoa(try))
		n, err := Reap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 1 {
			break
		}
		if _, err := cli.ContainerInspect(ctx, dead, client.ContainerInspectOptions{}); err == nil || try == 3 {
			t.Fatalf("Reap removed %d containers, want at least the dead owner's (try %d)", n, try)
		}
	}
	if _, err := cli.ContainerInspect(ctx, dead, client.ContainerInspectOptions{}); err == nil {
		t.Error("the dead owner's container is still there")
	}
	if _, err := cli.ContainerInspect(ctx, live, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("the live owner's container was removed: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"host=h user=u password=secret dbname=d":        "host=h user=u password=xxxxx dbname=d",
		"127.0.0.1:6379":                                "127.0.0.1:6379",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRequired(t *testing.T) {
	t.Setenv(EnvRequireServers, "1")
	if !Required() {
		t.Error("Required() = false with IDEM_REQUIRE_SERVERS=1")
	}
	t.Setenv(EnvRequireServers, "")
	if Required() {
		t.Error("Required() = true without IDEM_REQUIRE_SERVERS")
	}
}

// TestSignalAndKill runs a helper process that starts Redis: on SIGINT its
// CloseAllOnSignal handler removes the container; after SIGKILL the
// container stays, and Reap removes it since its owner is gone.
func TestSignalAndKill(t *testing.T) {
	if os.Getenv("IDEM_SERVERS_HELPER") == "1" {
		signalHelper()
		return
	}
	clearEnv(t)
	requireDocker(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSignalAndKill$", "-test.count=1")
			cmd.Env = append(os.Environ(), "IDEM_SERVERS_HELPER=1")
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("helper: %v (%q)", err, line)
			}
			childSession, ok := strings.CutPrefix(strings.TrimSpace(line), "READY ")
			if !ok {
				t.Fatalf("helper said %q", line)
			}
			if n := sessionContainers(t, childSession); n != 1 {
				t.Fatalf("helper has %d containers, want 1", n)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("helper exited with %v, want death by %v", err, sig)
			}
			if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("helper exit status %v, want death by %v", err, sig)
			}
			if sig == syscall.SIGKILL {
				if n := sessionContainers(t, childSession); n != 1 {
					t.Fatalf("after SIGKILL the helper left %d containers, want 1 for Reap", n)
				}
				n, err := Reap(dockerCtx(t))
				if err != nil {
					t.Fatal(err)
				}
				if n < 1 {
					t.Errorf("Reap removed %d containers", n)
				}
			}
			if n := sessionContainers(t, childSession); n != 0 {
				t.Errorf("%d of the helper's containers left after %v", n, sig)
			}
		})
	}
}

// signalHelper is the child of TestSignalAndKill.
func signalHelper() {
	stop := CloseAllOnSignal()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Redis, Options{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("READY", SessionID())
	time.Sleep(time.Minute)
	_ = s.Close(ctx)
	os.Exit(3)
}

// sessionContainers counts containers labelled with session id.
func sessionContainers(t *testing.T, id string) int {
	t.Helper()
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.ContainerList(dockerCtx(t), client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelSession+"="+id),
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Items)
}

// TestFailedStartLeavesNothing starts Postgres from the Redis image, whose
// entrypoint runs postgres as root, which refuses: Start must fail with the
// container's last log line and remove the container.
func TestFailedStartLeavesNothing(t *testing.T) {
	clearEnv(t)
	requireDocker(t)
	img := os.Getenv(EnvRedisImage)
	if img == "" {
		img = LocalRedisImage
	}
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if !present(dockerCtx(t), cli, img) {
		skipOrFail(t, "%s not present: run `make images`", img)
	}
	t0 := time.Now()
	s, err := Start(context.Background(), Postgres, Options{Image: img, StartTimeout: 20 * time.Second, Logf: t.Logf})
	if err == nil {
		_ = s.Close(context.Background())
		t.Fatal("Start succeeded")
	}
	t.Logf("%v (%s)", err, time.Since(t0).Round(time.Millisecond))
	if !strings.HasPrefix(err.Error(), "cannot start postgres from image "+img) || errors.Is(err, ErrUnavailable) {
		t.Errorf("got %v", err)
	}
	if n := ourContainers(t); n != 0 {
		t.Errorf("%d containers left after a failed Start", n)
	}
}

// TestChooseImage checks the order: explicit image, official, local.
func TestChooseImage(t *testing.T) {
	clearEnv(t)
	requireDocker(t)
	cli, err := dockerClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := dockerCtx(t)
	if !present(ctx, cli, LocalRedisImage) {
		skipOrFail(t, "%s not present: run `make images`", LocalRedisImage)
	}
	t.Setenv(EnvRedisImage, "")
	saved := kinds[Redis]
	defer func() { kinds[Redis] = saved }()
	official := func(img string) { k := kinds[Redis]; k.officialImage = img; kinds[Redis] = k }

	// An official image that is present wins over the local one.
	stand := LocalRedisImage + "-test-" + SessionID()
	official(stand)
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: LocalRedisImage, Target: stand}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = cli.ImageRemove(context.Background(), stand, client.ImageRemoveOptions{})
	}()
	if img, err := chooseImage(ctx, cli, Redis, Options{}); err != nil || img != stand {
		t.Errorf("official present: chose %q, %v", img, err)
	}
	// Without it (and no registry), the local image.
	official("idemcheck/not-an-official-image:0")
	if img, err := chooseImage(ctx, cli, Redis, Options{}); err != nil || img != LocalRedisImage {
		t.Errorf("official missing: chose %q, %v", img, err)
	}
	// The environment's image is used directly.
	t.Setenv(EnvRedisImage, LocalRedisImage)
	kinds[Redis] = saved
	if img, err := chooseImage(ctx, cli, Redis, Options{}); err != nil || img != LocalRedisImage {
		t.Errorf("IDEM_REDIS_IMAGE: chose %q, %v", img, err)
	}
}
