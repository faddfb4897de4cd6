// Package servers provisions the Postgres and Redis servers that idemcheck's
// stores run against (docs/DESIGN.md §5).
//
// A server comes from, in order:
//
//  1. the environment: IDEM_POSTGRES_DSN / IDEM_REDIS_ADDR name an existing
//     server, which is pinged and used as is (no container; faults that need
//     control of the server must skip);
//  2. testcontainers-go's postgres and redis modules with the official images
//     (postgres:16-alpine, redis:7), when the image is present locally or a
//     registry answers a pull;
//  3. the same modules with the local images that `make images` builds from
//     Debian packages (idemcheck/postgres:15, idemcheck/redis:7; the names can
//     be changed with IDEM_POSTGRES_IMAGE / IDEM_REDIS_IMAGE, which, when set,
//     are used directly).
//
// Every container started here is labelled idemcheck=1 and removed by
// [Server.Close], by [Start] itself when it fails half-way, by [CloseAll] (for
// a CLI's signal handler, or [CloseAllOnSignal]), and, if the process was
// killed, by [Reap] in a later run. Errors are one line that says what is
// missing and how to fix it; passwords are never printed.
package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
)

// Kind names a server flavour.
type Kind string

// The kinds of server this package provisions.
const (
	// Postgres is a PostgreSQL server; Server.Addr is a pgx DSN.
	Postgres Kind = "postgres"
	// Redis is a Redis server; Server.Addr is host:port.
	Redis Kind = "redis"
)

// Environment variables read by this package.
const (
	// EnvPostgresDSN names an existing Postgres server (a pgx DSN or URL).
	EnvPostgresDSN = "IDEM_POSTGRES_DSN"
	// EnvRedisAddr names an existing Redis server (host:port).
	EnvRedisAddr = "IDEM_REDIS_ADDR"
	// EnvPostgresImage overrides the local Postgres image (default idemcheck/postgres:15).
	EnvPostgresImage = "IDEM_POSTGRES_IMAGE"
	// EnvRedisImage overrides the local Redis image (default idemcheck/redis:7).
	EnvRedisImage = "IDEM_REDIS_IMAGE"
	// EnvRequireServers set to 1 makes tests fail, not skip, when a server is missing.
	EnvRequireServers = "IDEM_REQUIRE_SERVERS"
)

// Images used when the environment names none.
const (
	// OfficialPostgresImage is the image testcontainers' postgres module documents.
	OfficialPostgresImage = "postgres:16-alpine"
	// OfficialRedisImage is the image testcontainers' redis module documents.
	OfficialRedisImage = "redis:7"
	// LocalPostgresImage is built by images/build.sh from Debian's postgresql-15.
	LocalPostgresImage = "idemcheck/postgres:15"
	// LocalRedisImage is built by images/build.sh from Debian's redis-server.
	LocalRedisImage = "idemcheck/redis:7"
)

// Options tunes Start. The zero value follows the order in the package doc.
type Options struct {
	// Image, when set, is the only image tried (the environment server is
	// still preferred unless Container is set).
	Image string
	// Container ignores IDEM_POSTGRES_DSN / IDEM_REDIS_ADDR and always starts
	// a container, for work that must pause, kill or restart the server.
	Container bool
	// StartTimeout bounds starting a container (default 3 minutes); the context
	// passed to Start bounds it too.
	StartTimeout time.Duration
	// Logf, when set, receives progress lines (which image, how long it took)
	// and testcontainers' own log.
	Logf func(format string, args ...any)
	// Notef, when set, receives the lines a user should see even when
	// progress is not shown: containers left behind by a killed run that
	// this process removed.
	Notef func(format string, args ...any)
}

// Server is a running Postgres or Redis server and where to reach it.
type Server struct {
	// Kind says which server this is.
	Kind Kind
	// Addr is a pgx DSN for Postgres (postgres://user:password@host:port/db?...)
	// and host:port for Redis. It may hold a password: print String() instead.
	Addr string
	// Source says where the server came from: "env" or "container:<image>".
	Source string
	// Managed is true when this package started the container, so callers
	// may pause, kill or restart it through Container().
	Managed bool
	// Image is the image the container runs (empty for an env server).
	Image string

	ctr       testcontainers.Container
	closeOnce sync.Once
	closeErr  error
}

// Container returns the container behind a managed server, for pausing,
// killing or restarting it; it is nil for a server from the environment.
func (s *Server) Container() testcontainers.Container {
	if s == nil {
		return nil
	}
	return s.ctr
}

// String describes the server without its password.
func (s *Server) String() string {
	if s == nil {
		return "<nil server>"
	}
	return fmt.Sprintf("%s at %s (%s)", s.Kind, Redact(s.Addr), s.Source)
}

// Close removes the server's container (with its volumes); it does nothing
// for a server from the environment. It is safe to call more than once and
// from several goroutines.
func (s *Server) Close(ctx context.Context) error {
	if s == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		if s.ctr == nil {
			return
		}
		unregister(s)
		// Killed at once (SIGKILL): this is teardown, the container and
		// its volumes go with it, and a graceful stop cost every run's
		// end a third of a second (Postgres's smart shutdown on SIGTERM
		// would also wait for idle clients).
		err := s.ctr.Terminate(ctx, testcontainers.StopTimeout(0))
		if err != nil && !isNotFound(err) {
			s.closeErr = fmt.Errorf("remove %s container %s: %w", s.Kind, shortID(s.ctr.GetContainerID()), err)
		}
	})
	return s.closeErr
}

// ErrUnavailable is matched (errors.Is) by Start's errors that mean "no
// server can be had here" (Docker not running, image missing), as opposed to
// a server that was named but is broken. ForTest skips on it.
var ErrUnavailable = errors.New("server unavailable")

// Error is Start's error: one line that says what failed and how to fix it.
type Error struct {
	// Kind is the server that could not be had.
	Kind Kind
	// Msg is the whole one-line message.
	Msg string
	// Unavailable marks errors that match ErrUnavailable.
	Unavailable bool
}

// Error returns the one-line message.
func (e *Error) Error() string { return e.Msg }

// Is reports whether target is ErrUnavailable and e is such an error.
func (e *Error) Is(target error) bool { return target == ErrUnavailable && e.Unavailable }

func errorf(kind Kind, unavailable bool, format string, args ...any) *Error {
	return &Error{Kind: kind, Unavailable: unavailable, Msg: oneLine(fmt.Sprintf(format, args...))}
}

// Start returns a running server of the given kind, from the environment or
// from a container (see the package doc for the order). The caller must Close
// it. Errors are *Error values, returned within about 15 seconds when Docker,
// the image or the named server is missing.
func Start(ctx context.Context, kind Kind, opts Options) (*Server, error) {
	facts, ok := kinds[kind]
	if !ok {
		return nil, unknownKind(kind)
	}
	if !opts.Container {
		if v := os.Getenv(facts.envAddr); v != "" {
			return fromEnv(ctx, kind, v)
		}
	}
	return startContainer(ctx, kind, opts)
}

// Named reports whether the environment names an existing server of
// kind (IDEM_POSTGRES_DSN, IDEM_REDIS_ADDR), which Start then uses rather
// than start a container.
func Named(kind Kind) bool {
	facts, ok := kinds[kind]
	return ok && os.Getenv(facts.envAddr) != ""
}

// Required reports whether IDEM_REQUIRE_SERVERS=1: in CI a test that needs a
// server must fail, not skip, when the server cannot be had.
func Required() bool {
	return os.Getenv(EnvRequireServers) == "1"
}

// fromEnv verifies the server named in the environment with a ping.
func fromEnv(ctx context.Context, kind Kind, v string) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := kinds[kind].checkEnv(ctx, v); err != nil {
		return nil, err
	}
	return &Server{Kind: kind, Addr: v, Source: "env"}, nil
}

// Redact returns s with the password of any URL-style DSN in it replaced by
// "xxxxx", and key/value password=... settings likewise.
func Redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			s = u.String()
		}
	}
	fields := strings.Fields(s)
	changed := false
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			fields[i] = k + "=xxxxx"
			changed = true
		}
	}
	if changed {
		s = strings.Join(fields, " ")
	}
	return s
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// scrub removes secret from msg.
func scrub(msg, secret string) string {
	if secret == "" {
		return msg
	}
	return strings.ReplaceAll(msg, secret, "xxxxx")
}

// netReason is the short cause of a failed dial ("connect: connection
// refused", "lookup db: no such host", "timed out after 10s").
func netReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("timed out after %s", pingTimeout)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.Error()
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		return opErr.Err.Error()
	}
	return err.Error()
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
