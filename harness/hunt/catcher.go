package hunt

import "github.com/idemcheck/idemcheck/harness/check"

// Catcher names, for each mutant, the checker that catches it by name: the
// one whose failure says what the bug did (a double charge, a stale write
// accepted, a wrong answer replayed, a stuck key), and which its demo on
// its home store (sqlite, or the one backend it belongs to) must fail.
// Linearizability fails on most mutants too, but says least; it is named
// only where nothing else can see the bug (the provider dedupes by the
// order, so two owners at once charge once and only the order of the
// answers betrays them). `idemcheck list --json` gives
// it as the mutant's killing checker, and a test runs every demo and checks
// that this checker is among those that caught it.
var Catcher = map[string]string{
	"select-then-insert":           check.AtMostOnce,
	"unfenced-complete":            check.Fencing,
	"unfenced-release":             check.Fencing,
	"no-fingerprint":               check.Mismatch,
	"blind-takeover":               check.AtMostOnce,
	"token-reuse":                  check.Fencing,
	"no-takeover":                  check.Liveness,
	"short-retention":              check.AtMostOnce,
	"stale-overwrite":              check.AtMostOnce,
	"case-folded-key":              check.Mismatch,
	"tenant-blind":                 check.Mismatch,
	"complete-overwrites-done":     check.Replay,
	"release-deletes-done":         check.AtMostOnce,
	"prune-sweeps-in-flight":       check.Linearizable,
	"split-claim":                  check.Linearizable,
	"fence-not-incremented":        check.Fencing,
	"takeover-ignores-fingerprint": check.Mismatch,
	"never-expire":                 check.Retention,
	"redis-no-persistence":         check.AtMostOnce,
	"postgres-async-replication":   check.AtMostOnce,
	"redis-async-replication":      check.AtMostOnce,
	"key-per-try":                  check.AtMostOnce,
	"no-key":                       check.AtMostOnce,
	"top-hop-only":                 check.AtMostOnce,
	"lock-shorter-than-work":       check.Exclusive,
	"release-on-error-unkeyed":     check.AtMostOnce,
}
