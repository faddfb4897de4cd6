package scenario

import (
	"context"

	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// runRetryAfterCharge: per key, one client whose first attempt's work charges and
// then fails (the provider's reply is lost). It releases the claim, which
// is safe only because the provider is keyed by the order, and retries. A
// client-side mutant's options are applied last, so its mistake is what
// runs.
func runRetryAfterCharge(ctx context.Context, env *Env) {
	parallel(env.Keys, func(k int) {
		o := env.Order(k, "")
		c := env.NewClient()
		c.Policy = stores.ReleaseOnError
		c.FailWork = func(_ workload.Order, attempt int) bool { return attempt == 1 }
		c.FailAfterCharge = true
		env.ApplyWorkload(c)
		c.Submit(ctx, o)
	})
}
