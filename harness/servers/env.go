package servers

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// pingTimeout bounds the check of a server named in the environment.
const pingTimeout = 10 * time.Second

// pingPostgres connects to dsn and pings it, turning failures into one line.
func pingPostgres(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password in its parse errors; scrub anyway.
		return errorf(Postgres, false, "%s is not a valid postgres DSN (%s): fix it, or unset it to start a container",
			EnvPostgresDSN, scrub(parseReason(err), passwordOf(dsn)))
	}
	where := cfg.Host
	if !strings.HasPrefix(where, "/") {
		where = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(context.WithoutCancel(ctx))
	}
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return errorf(Postgres, false, "authentication failed for user %s at %s: check %s", cfg.User, where, EnvPostgresDSN)
		case "3D000": // invalid_catalog_name
			return errorf(Postgres, false, "postgres at %s has no database %q: create it, or fix %s", where, cfg.Database, EnvPostgresDSN)
		}
		return errorf(Postgres, false, "postgres at %s refused the connection: %s (SQLSTATE %s): check %s",
			where, scrub(pgErr.Message, cfg.Password), pgErr.Code, EnvPostgresDSN)
	}
	return errorf(Postgres, false, "cannot reach postgres at %s: %s", where, scrub(netReason(err), cfg.Password))
}

// parseReason strips pgx's "cannot parse `...`:" prefix from a parse error.
func parseReason(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, "`: "); i >= 0 && strings.HasPrefix(s, "cannot parse `") {
		s = s[i+3:]
	}
	return s
}

// passwordOf digs the password out of a DSN that pgx could not parse, so
// that it can be scrubbed from the message.
func passwordOf(dsn string) string {
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		userinfo, _, _ := strings.Cut(rest, "@")
		if _, pw, ok := strings.Cut(userinfo, ":"); ok && strings.Contains(rest, "@") {
			return pw
		}
	}
	for _, f := range strings.Fields(dsn) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.EqualFold(k, "password") {
			return strings.Trim(v, "'")
		}
	}
	return ""
}

// pingRedis pings the Redis server at addr (host:port).
func pingRedis(ctx context.Context, addr string) error {
	if strings.Contains(addr, "://") {
		return errorf(Redis, false, "%s must be host:port, not a URL: fix it, or unset it to start a container", EnvRedisAddr)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return errorf(Redis, false, "%s=%q is not host:port (%v): fix it, or unset it to start a container", EnvRedisAddr, addr, err)
	}
	// Dial first: go-redis would retry and log each failed dial itself.
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return errorf(Redis, false, "cannot reach redis at %s: %s", addr, netReason(err))
	}
	_ = nc.Close()
	c := redis.NewClient(&redis.Options{
		Addr:          addr,
		DialTimeout:   pingTimeout,
		MaxRetries:    -1,
		DialerRetries: 1,
		PoolSize:      1,
		// Don't announce client info with CLIENT SETINFO (older servers and
		// proxies reject it, which would read as a failed ping).
		DisableIdentity: true,
	})
	defer c.Close()
	err = c.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "WRONGPASS"):
		return errorf(Redis, false, "authentication failed at redis %s (%s): point %s at a server without a password", addr, msg, EnvRedisAddr)
	case isRedisReply(err):
		return errorf(Redis, false, "redis at %s answered PING with an error: %s: check %s", addr, msg, EnvRedisAddr)
	}
	return errorf(Redis, false, "cannot reach redis at %s: %s", addr, netReason(err))
}

// isRedisReply reports whether err is an error reply from the server rather
// than a network failure.
func isRedisReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// redisAddr is host:port of a Redis container's endpoint ("redis://h:p" or "h:p").
func redisAddr(endpoint string) string {
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		return rest
	}
	return endpoint
}
