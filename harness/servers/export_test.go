package servers

import "context"

// PromoteForTest makes the standby of kind at addr the primary, as a
// failover does (one attempt).
func PromoteForTest(ctx context.Context, kind Kind, addr string) error {
	return kinds[kind].promote(ctx, addr)
}
