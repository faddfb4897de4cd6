package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// NoPersistence is the configuration mutant "redis-no-persistence": the
// correct scripts, on a server that keeps nothing on disk (no append-only
// file, no RDB snapshots). Every acknowledged claim and saved answer lives
// in memory only, so a server crash or restart forgets them: a retry then
// claims the key afresh and runs the work again. The store-faults scenario
// kills it (its restart); the correct store, on a server with
// `appendonly yes` and `appendfsync always` (as harness/servers starts it),
// passes the same scenario.
//
// The mutation is the server's configuration, so the variant makes it
// itself and needs nothing special from whoever started the server: every
// connection the store opens first runs
//
//	CONFIG SET appendonly no
//	CONFIG SET save ""
//
// (CONFIG SET lasts until the server restarts, and a restarted server reads
// its command line again, so the settings are made on every new connection,
// and the store's first connection after a restart turns persistence off
// again). Close puts back the settings the server had when the store was
// opened. Run it only on a server of your own: while it is open, every
// client of that server loses its durability.
const NoPersistence = "redis-no-persistence"

// disablePersistence reads the server's persistence settings, makes opt's
// connections turn them off, and returns the function that restores them.
func disablePersistence(ctx context.Context, opt *goredis.Options) (restore func(), err error) {
	plain := *opt
	c := goredis.NewClient(&plain)
	defer c.Close()
	orig := map[string]string{}
	for _, name := range []string{"appendonly", "save"} {
		m, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return nil, fmt.Errorf("redis: %s needs CONFIG GET/SET on the server: %w", NoPersistence, err)
		}
		orig[name] = m[name]
	}
	opt.OnConnect = func(ctx context.Context, cn *goredis.Conn) error {
		if err := cn.ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
			return fmt.Errorf("%s: CONFIG SET appendonly no: %w", NoPersistence, err)
		}
		if err := cn.ConfigSet(ctx, "save", "").Err(); err != nil {
			return fmt.Errorf("%s: CONFIG SET save \"\": %w", NoPersistence, err)
		}
		return nil
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c := goredis.NewClient(&plain)
		defer c.Close()
		// Best effort: a server that is gone has no settings to restore.
		_ = c.ConfigSet(ctx, "save", orig["save"]).Err()
		_ = c.ConfigSet(ctx, "appendonly", orig["appendonly"]).Err()
	}, nil
}
