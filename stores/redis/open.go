package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemcheck/idemcheck/stores"
)

// quiet is go-redis's logger for the stores: it says nothing. go-redis
// logs a dial that failed to stderr by itself ("connection pool: failed
// to dial after 5 attempts"), lines a run's output does not want while
// the server is paused or cut off on purpose; the store's callers get
// each failure as its error, and the history records it.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { goredis.SetLogger(quiet{}) }

// New connects to addr, a host:port or a redis:// (rediss://, unix://) URL,
// pings the server, loads the scripts of cfg.Variant and reads the server's
// persistence settings. The client never retries a command by itself (see
// the package doc), whatever the URL says.
func New(ctx context.Context, addr string, cfg stores.Config) (*Store, error) {
	if cfg.Variant == AsyncReplication {
		return nil, fmt.Errorf("redis: variant %s belongs to the redis-replicated backend", AsyncReplication)
	}
	return newStore(ctx, addr, cfg, 0)
}

// newStore is New, with replicas > 0 for the synchronous replicated store.
func newStore(ctx context.Context, addr string, cfg stores.Config, replicas int) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	v := cfg.Variant
	if v == "" {
		v = stores.Correct
	}
	ss, ok := scriptSets[v]
	if v == NoPersistence || v == AsyncReplication {
		ss, ok = scriptSets[stores.Correct], true // correct scripts, a server configured otherwise
	}
	if !ok {
		return nil, fmt.Errorf("redis: unknown variant %q (known: %s, %s)", v, stores.Correct, strings.Join(Mutants, ", "))
	}
	ss = ss.hooked(cfg)
	opt, err := options(addr)
	if err != nil {
		return nil, err
	}
	// The client's retries, through the statement hook
	// (stores.SettingsStatement) like the scripts: none (see options).
	set, err := cfg.Settings([]stores.Setting{{Name: "max_retries", Value: fmt.Sprint(opt.MaxRetries)}})
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	if opt.MaxRetries, err = strconv.Atoi(stores.SettingValue(set, "max_retries")); err != nil {
		return nil, fmt.Errorf("redis: settings: max_retries: %w", err)
	}
	var restore func()
	if v == NoPersistence {
		if restore, err = disablePersistence(ctx, opt); err != nil {
			return nil, err
		}
	}
	rdb := goredis.NewClient(opt)
	rdb.AddHook(roundTrips{})
	s := &Store{
		rdb:       rdb,
		variant:   v,
		scripts:   ss,
		prefix:    "idem:" + cfg.Namespace + ":",
		lockTTL:   ceilMillis(cfg.LockTTL),
		retention: ceilMillis(cfg.Retention),
		restore:   restore,
		replicas:  replicas,
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		s.Close()
		return nil, fmt.Errorf("redis: cannot reach server at %s: %w", opt.Addr, err)
	}
	for _, sc := range ss.all() {
		if err := s.load(ctx, sc); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.durability, s.durErr = readDurability(ctx, rdb)
	return s, nil
}

// options turns addr into client options with the store's settings.
func options(addr string) (*goredis.Options, error) {
	var opt *goredis.Options
	if strings.Contains(addr, "://") {
		o, err := goredis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("redis: bad address %q: %w", addr, err)
		}
		opt = o
	} else {
		if addr == "" {
			return nil, errors.New("redis: empty address (want host:port or redis://...)")
		}
		opt = &goredis.Options{Addr: addr}
	}
	opt.MaxRetries = -1 // never resend a script whose reply was lost: see the package doc
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// ceilMillis rounds d up to whole milliseconds, the server clock's unit.
func ceilMillis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// readDurability reads the persistence settings; the error says why they are
// unsafe or could not be read.
func readDurability(ctx context.Context, rdb *goredis.Client) (string, error) {
	get := func(name string) (string, error) {
		m, err := rdb.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", err
		}
		val, ok := m[name]
		if !ok {
			return "", fmt.Errorf("CONFIG GET %s: no such setting", name)
		}
		return val, nil
	}
	aof, err := get("appendonly")
	if err != nil {
		return "unknown", fmt.Errorf("redis: cannot read persistence settings (CONFIG disabled?): %w", err)
	}
	fsync, err := get("appendfsync")
	if err != nil {
		return "unknown", fmt.Errorf("redis: cannot read persistence settings (CONFIG disabled?): %w", err)
	}
	return judgeDurability(aof, fsync)
}

// judgeDurability describes the settings and says whether a crash can lose
// an acknowledged write.
func judgeDurability(appendonly, appendfsync string) (string, error) {
	desc := "appendonly=" + appendonly + " appendfsync=" + appendfsync
	if appendonly != "yes" || appendfsync != "always" {
		return desc, fmt.Errorf("%w (server has %s)", ErrNotDurable, desc)
	}
	return desc, nil
}

// Durability reports the server's persistence settings as read at Open
// ("appendonly=yes appendfsync=always"), with an error when a server crash
// can forget an acknowledged claim (wrapping ErrNotDurable) or when the
// settings could not be read. Callers warn on the error; the store works
// either way.
func (s *Store) Durability() (string, error) { return s.durability, s.durErr }
