package harness

import (
	"context"

	"github.com/idemcheck/idemcheck/stores"
)

// retry-after-charge is the scenario of the client-side mutants that retry into a
// second charge (mutants_client.go): it needs no scheduler, only a retry
// after the provider acted.
func init() {
	Scenarios = append(Scenarios, Scenario{Name: "retry-after-charge",
		Doc: "the provider charges but its reply is lost; the client releases its claim (the provider is keyed, as the card's lab) and retries: one charge per order",
		run: runRetryAfterCharge})
}

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
		c.FailWork = func(_ Order, attempt int) bool { return attempt == 1 }
		c.FailAfterCharge = true
		env.applyWorkload(c)
		c.Submit(ctx, o)
	})
}
