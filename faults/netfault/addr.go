package netfault

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// PostgresUpstream is the host:port a Postgres DSN (URL or keyword/value
// form) connects to: the upstream of a proxy in front of it. A DSN with a
// Unix socket or several hosts cannot be proxied.
func PostgresUpstream(dsn string) (string, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("netfault: not a postgres DSN: %v", err)
	}
	for _, f := range cfg.Fallbacks { // sslmode=prefer adds a fallback to the same host
		if f.Host != cfg.Host || f.Port != cfg.Port {
			return "", fmt.Errorf("netfault: the DSN names several hosts; a proxy fronts one")
		}
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return "", fmt.Errorf("netfault: the DSN connects through a Unix socket (%s); a proxy needs TCP", cfg.Host)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), nil
}

// RewriteDSN points a Postgres DSN at addr (host:port, e.g. a Proxy's Addr)
// and leaves everything else (user, password, database, options) as it
// was. Both the URL form (postgres://…) and the keyword/value form
// (host=… port=…) are rewritten.
func RewriteDSN(dsn, addr string) (string, error) {
	if _, err := PostgresUpstream(dsn); err != nil {
		return "", err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("netfault: %q is not host:port: %v", addr, err)
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("netfault: not a postgres URL: %v", err)
		}
		u.Host = net.JoinHostPort(host, port)
		q := u.Query()
		if q.Has("host") || q.Has("port") || q.Has("hostaddr") {
			q.Del("host")
			q.Del("port")
			q.Del("hostaddr")
			u.RawQuery = q.Encode()
		}
		return u.String(), nil
	}
	fields, err := splitKeywords(dsn)
	if err != nil {
		return "", err
	}
	var out []string
	for _, f := range fields {
		switch f.key {
		case "host", "port", "hostaddr":
			continue
		}
		out = append(out, f.raw)
	}
	out = append(out, "host="+host, "port="+port)
	return strings.Join(out, " "), nil
}

type keyword struct{ key, raw string }

// splitKeywords splits a keyword/value DSN into its settings, keeping each
// one's text as written (values may be single-quoted, with \' and \\).
func splitKeywords(dsn string) ([]keyword, error) {
	var out []keyword
	s := strings.TrimSpace(dsn)
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, fmt.Errorf("netfault: malformed DSN setting %q", s)
		}
		key := strings.TrimSpace(s[:eq])
		i := eq + 1
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i < len(s) && s[i] == '\'' {
			i++
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(s) {
				return nil, fmt.Errorf("netfault: unterminated quote in DSN setting %s", key)
			}
			i++
		} else {
			for i < len(s) && s[i] != ' ' {
				i++
			}
		}
		out = append(out, keyword{key: key, raw: key + "=" + strings.TrimLeft(s[eq+1:i], " ")})
		s = strings.TrimLeft(s[i:], " ")
	}
	return out, nil
}

// RedisUpstream is the host:port of a Redis address: host:port as is, or
// the host of a redis:// or rediss:// URL.
func RedisUpstream(addr string) (string, error) {
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			return "", fmt.Errorf("netfault: %q is not a redis:// URL", addr)
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "6379")
		}
		return host, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("netfault: redis address %q is not host:port: %v", addr, err)
	}
	return addr, nil
}

// RewriteRedisAddr points a Redis address (host:port or URL) at proxy.
func RewriteRedisAddr(addr, proxy string) (string, error) {
	if _, err := RedisUpstream(addr); err != nil {
		return "", err
	}
	if strings.Contains(addr, "://") {
		u, _ := url.Parse(addr)
		u.Host = proxy
		return u.String(), nil
	}
	return proxy, nil
}

// StartFor starts a proxy in front of a store's server and returns it with
// the address to open the store at instead of addr. backend is the store's
// registry name: "postgres" (addr a DSN) or "redis" (addr host:port or a
// URL); other backends have no network to fault.
func StartFor(name, backend, addr string) (*Proxy, string, error) {
	var upstream string
	var err error
	rewrite := RewriteDSN
	switch backend {
	case "postgres":
		upstream, err = PostgresUpstream(addr)
	case "redis":
		upstream, err = RedisUpstream(addr)
		rewrite = RewriteRedisAddr
	default:
		return nil, "", fmt.Errorf("netfault: store %s has no network between it and its data", backend)
	}
	if err != nil {
		return nil, "", err
	}
	p, err := Start(name, upstream)
	if err != nil {
		return nil, "", err
	}
	via, err := rewrite(addr, p.Addr())
	if err != nil {
		p.Close()
		return nil, "", err
	}
	return p, via, nil
}
