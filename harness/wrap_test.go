package harness_test

import (
	"context"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/stores"
)

// wrapStores makes every store o's backend opens the one wrap makes of it:
// how a test runs the harness on a store with a bug of its own making.
func wrapStores(o *harness.Options, wrap func(stores.Store) stores.Store) {
	open := o.Backend.Open
	o.Backend.Open = func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
		s, err := open(ctx, addr, cfg)
		if err != nil {
			return nil, err
		}
		return wrap(s), nil
	}
}
