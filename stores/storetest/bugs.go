// Package storetest holds counterexamples shared by the backends' tests:
// short, deterministic schedules that make one mutant's bug happen on any
// store, so each backend shows that its mutant has the bug and its correct
// variant does not, without writing the schedule four times.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// Clock is the time a test drives a store with: for a caller-clock store
// a manual clock (Advance moves it), for a server-clock store the real
// clock (Advance sleeps).
type Clock struct {
	Now     func() time.Time
	Advance func(d time.Duration)
}

// Bug plays one counterexample on s (configured with cfg, whose LockTTL
// and Retention must be short for a server-clock store: some bugs wait
// them out) and says whether the bug happened and what was seen.
type Bug func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bug bool, seen string)

// Bugs has a counterexample for each of the mutants that merge keys, write
// over a done key, or get pruning wrong.
var Bugs = map[string]Bug{
	// "KEY-1" is claimed and saved; "key-1", another key, must be new.
	"case-folded-key": func(t testing.TB, s stores.Store, c Clock, _ stores.Config) (bool, string) {
		done(t, s, c, stores.KeyRef{Tenant: "acme", Key: "KEY-1"}, "fp-1")
		d := begin(t, s, c, stores.KeyRef{Tenant: "acme", Key: "key-1"}, "fp-2")
		return d.Outcome != stores.Claimed, fmt.Sprintf("key-1 after KEY-1: %v", d.Outcome)
	},
	// A key is saved for amount 1000; the same key with amount 1001 must
	// be refused as a mismatch, not replayed.
	"fingerprint-drops-amount": func(t testing.TB, s stores.Store, c Clock, _ stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "amount"}
		done(t, s, c, k, "amount=1000")
		d := begin(t, s, c, k, "amount=1001")
		return d.Outcome != stores.Mismatch, fmt.Sprintf("amount=1001 after amount=1000: %v", d.Outcome)
	},
	// Tenant a's "k" is claimed and saved; tenant b's "k" must be new.
	"tenant-blind": func(t testing.TB, s stores.Store, c Clock, _ stores.Config) (bool, string) {
		done(t, s, c, stores.KeyRef{Tenant: "a", Key: "k"}, "fp-1")
		d := begin(t, s, c, stores.KeyRef{Tenant: "b", Key: "k"}, "fp-2")
		return d.Outcome != stores.Claimed, fmt.Sprintf("b/k after a/k: %v", d.Outcome)
	},
	// Tenant "t:x"'s "k" is claimed and saved; tenant "t"'s "x:k" must be
	// new.
	"joined-key": func(t testing.TB, s stores.Store, c Clock, _ stores.Config) (bool, string) {
		done(t, s, c, stores.KeyRef{Tenant: "t:x", Key: "k"}, "fp-1")
		d := begin(t, s, c, stores.KeyRef{Tenant: "t", Key: "x:k"}, "fp-2")
		return d.Outcome != stores.Claimed, fmt.Sprintf("t/x:k after t:x/k: %v", d.Outcome)
	},
	// The owner saves twice with its token: the second must be fenced.
	"complete-overwrites-done": func(t testing.TB, s stores.Store, c Clock, _ stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "twice"}
		tok := done(t, s, c, k, "fp")
		err := s.Complete(context.Background(), k, tok, stores.Response{Status: 500, Body: "second"})
		mustDefinite(t, err)
		d := begin(t, s, c, k, "fp")
		return err == nil, fmt.Sprintf("second save: %v; replay %q", err, d.Response.Body)
	},
	// The owner releases after its save: the release must be fenced.
	"release-deletes-done": func(t testing.TB, s stores.Store, c Clock, _ stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "deferred"}
		tok := done(t, s, c, k, "fp")
		err := s.Release(context.Background(), k, tok)
		mustDefinite(t, err)
		d := begin(t, s, c, k, "fp")
		return err == nil, fmt.Sprintf("release after the save: %v; then %v", err, d.Outcome)
	},
	// A live claim is released with the tokens "%" (SQL LIKE's any run),
	// "*" (a glob's) and ".*" (a regular expression's, a Lua pattern's):
	// each release must be fenced (a store may also refuse a malformed
	// pattern with an error), and the key stay in flight: claimed again
	// only as a takeover once LockTTL has passed (claimedWhileLive).
	"release-token-like": func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "live"}
		claim := begin(t, s, c, k, "fp")
		if claim.Outcome != stores.Claimed {
			t.Fatalf("claim: %v", claim.Outcome)
		}
		var errs []error
		for _, pattern := range []stores.Token{"%", "*", ".*"} {
			errs = append(errs, s.Release(context.Background(), k, pattern))
		}
		d := begin(t, s, c, k, "fp")
		return claimedWhileLive(claim, d, cfg.LockTTL), fmt.Sprintf("releases with tokens %%, * and .*: %v; then %s", errs, claimedAfter(claim, d))
	},
	// "k-10" is saved; "k-1", a key it extends, is claimed and released:
	// "k-10" must still replay.
	"release-deletes-prefix": func(t testing.TB, s stores.Store, c Clock, _ stores.Config) (bool, string) {
		long, short := stores.KeyRef{Tenant: "acme", Key: "k-10"}, stores.KeyRef{Tenant: "acme", Key: "k-1"}
		done(t, s, c, long, "fp")
		d := begin(t, s, c, short, "fp")
		if d.Outcome != stores.Claimed {
			t.Fatalf("claim %s: %v", short, d.Outcome)
		}
		err := s.Release(context.Background(), short, d.Token)
		mustDefinite(t, err)
		d = begin(t, s, c, long, "fp")
		return d.Outcome != stores.Replay, fmt.Sprintf("k-10 after k-1's release (%v): %v", err, d.Outcome)
	},
	// A fresh claim is in flight when Prune runs: it must stay, claimed
	// again only as a takeover once LockTTL has passed (claimedWhileLive).
	"prune-sweeps-in-flight": func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "working"}
		claim := begin(t, s, c, k, "fp")
		if claim.Outcome != stores.Claimed {
			t.Fatalf("claim: %v", claim.Outcome)
		}
		if _, err := s.Prune(context.Background(), c.Now()); err != nil {
			t.Fatal(err)
		}
		d := begin(t, s, c, k, "fp")
		return claimedWhileLive(claim, d, cfg.LockTTL), fmt.Sprintf("after a prune, while the owner works: %s", claimedAfter(claim, d))
	},
	// The owner's claim goes stale; other parameters must still be 422.
	"takeover-ignores-fingerprint": func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "stale"}
		if d := begin(t, s, c, k, "fp"); d.Outcome != stores.Claimed {
			t.Fatalf("claim: %v", d.Outcome)
		}
		c.Advance(cfg.LockTTL + cfg.LockTTL/4)
		d := begin(t, s, c, k, "other-fp")
		return d.Outcome == stores.Claimed, fmt.Sprintf("other parameters on a stale claim: %v", d.Outcome)
	},
	// The owner claims; at once a request whose clock runs 2×LockTTL
	// ahead asks for the key: a store that declares the server's clock
	// answers 409 (only a LockTTL gone by on the real clock excuses a
	// takeover).
	"request-clock": func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "ahead"}
		from := c.Now()
		if d := begin(t, s, c, k, "fp"); d.Outcome != stores.Claimed {
			t.Fatalf("claim: %v", d.Outcome)
		}
		d, err := s.Begin(context.Background(), stores.Request{KeyRef: k, Fingerprint: "fp", Now: c.Now().Add(2 * cfg.LockTTL)})
		if err != nil {
			t.Fatalf("Begin(%s) 2×LockTTL ahead: %v", k, err)
		}
		took := c.Now().Sub(from)
		return d.Takeover && took < cfg.LockTTL, fmt.Sprintf("a request 2×LockTTL ahead, %v after the claim: %v (takeover %t)", took.Round(time.Millisecond), d.Outcome, d.Takeover)
	},
	// A crashed owner's claim, asked for one millisecond before LockTTL
	// (live: 409) and at exactly LockTTL (stale: the contract lets the key
	// be taken over). For a caller-clock store, whose clock Advance moves
	// by the millisecond; on a server's clock no sleep lands on it.
	"stale-boundary": func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "boundary"}
		if d := begin(t, s, c, k, "fp"); d.Outcome != stores.Claimed {
			t.Fatalf("claim: %v", d.Outcome)
		}
		c.Advance(cfg.LockTTL - time.Millisecond)
		if d := begin(t, s, c, k, "fp"); d.Outcome != stores.InFlight {
			t.Fatalf("1 ms before LockTTL: %v, want %v", d.Outcome, stores.InFlight)
		}
		c.Advance(time.Millisecond)
		d := begin(t, s, c, k, "fp")
		return d.Outcome != stores.Claimed, fmt.Sprintf("at exactly LockTTL: %v (takeover %t)", d.Outcome, d.Takeover)
	},
	// Tenant a's "k" is saved; half a retention later tenant b's "k" is
	// saved too; once a's is past its retention a prune runs: b's, young,
	// must stay and replay. On a real clock, a trial whose retry of b's
	// came once b's own retention could have passed (a loaded machine: a
	// quarter of a 300 ms retention is 75 ms) shows nothing, and is made
	// again on other keys: a correct Postgres store was said to show the
	// bug when its retry found b's key rightly gone.
	"prune-drops-tenant": func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bool, string) {
		var d stores.Decision
		var age time.Duration
		for try := range 5 {
			k := fmt.Sprintf("k%d", try)
			old, young := stores.KeyRef{Tenant: "a", Key: k}, stores.KeyRef{Tenant: "b", Key: k}
			done(t, s, c, old, "fp")
			c.Advance(cfg.Retention / 2)
			born := c.Now()
			done(t, s, c, young, "fp")
			c.Advance(cfg.Retention/2 + cfg.Retention/4)
			if _, err := s.Prune(context.Background(), c.Now()); err != nil {
				t.Fatal(err)
			}
			d = begin(t, s, c, young, "fp")
			if age = c.Now().Sub(born); age < cfg.Retention {
				break
			}
		}
		return d.Outcome != stores.Replay && age < cfg.Retention, fmt.Sprintf("b/k, %v old, after a prune of a/k: %v", age.Round(time.Millisecond), d.Outcome)
	},
	// A key saved done outlives its retention and a prune.
	"never-expire": func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bool, string) {
		k := stores.KeyRef{Tenant: "acme", Key: "old"}
		done(t, s, c, k, "fp")
		c.Advance(cfg.Retention + cfg.Retention/4)
		if _, err := s.Prune(context.Background(), c.Now()); err != nil {
			t.Fatal(err)
		}
		d := begin(t, s, c, k, "other-fp")
		return d.Outcome != stores.Claimed, fmt.Sprintf("past the retention, other parameters: %v", d.Outcome)
	},
	// A key is claimed and saved half a second into a second; one
	// millisecond before its retention ends, a Prune must keep it and its
	// retry be replayed.
	"created-in-seconds": func(t testing.TB, s stores.Store, c Clock, cfg stores.Config) (bool, string) {
		c.Advance(time.Second - time.Duration(c.Now().Nanosecond()) + 500*time.Millisecond)
		k := stores.KeyRef{Tenant: "acme", Key: "boundary"}
		done(t, s, c, k, "fp")
		c.Advance(cfg.Retention - time.Millisecond)
		n, err := s.Prune(context.Background(), c.Now())
		if err != nil {
			t.Fatal(err)
		}
		d := begin(t, s, c, k, "fp")
		return d.Outcome == stores.Claimed, fmt.Sprintf("pruned %d one millisecond before the retention; the retry: %v", n, d.Outcome)
	},
}

// claimedWhileLive says whether d, a Begin on the key that claim claimed,
// claimed it again while that claim was live: a fresh claim (the claim
// was gone, deleted) or a takeover the store decided less than lockTTL
// after the claim by its own clock. On a server's clock the test's calls
// take real time, and a loaded machine (make test's CI: a 0.5-3 s
// deschedule) can hold them apart past LockTTL (200 ms for Postgres, 300
// ms for Redis); the correct store then rightly takes the stale claim
// over, which is not the bug. A claim deleted under its owner is claimed
// afresh, not taken over, however late the Begin: the bug still shows.
func claimedWhileLive(claim, d stores.Decision, lockTTL time.Duration) bool {
	return d.Outcome == stores.Claimed && (!d.Takeover || d.DecidedAt.Sub(claim.DecidedAt) < lockTTL)
}

// claimedAfter says what claimedWhileLive judged by: d's outcome, whether
// it took over, and how long after the claim the store decided it.
func claimedAfter(claim, d stores.Decision) string {
	return fmt.Sprintf("%v (takeover %t, %v after the claim)", d.Outcome, d.Takeover, d.DecidedAt.Sub(claim.DecidedAt).Round(time.Millisecond))
}

// TwoOwners reports whether a and b, two Begins on one key, both claimed
// it while the other's claim was live: decided less than lockTTL apart by
// the store's clock (DecidedAt). On a server's clock a loaded machine can
// hold one of two concurrent Begins back past a short LockTTL (CI saw two
// decided 329 ms apart, LockTTL 200 ms), and the correct store then
// rightly takes the other's stale claim over: two claims, one owner at a
// time. The seen string says what was decided, and how far apart.
func TwoOwners(a, b stores.Decision, lockTTL time.Duration) (bool, string) {
	apart := b.DecidedAt.Sub(a.DecidedAt).Abs()
	return a.Outcome == stores.Claimed && b.Outcome == stores.Claimed && apart < lockTTL,
		fmt.Sprintf("%s and %s, decided %v apart", a.Outcome, b.Outcome, apart)
}

func begin(t testing.TB, s stores.Store, c Clock, k stores.KeyRef, fp string) stores.Decision {
	t.Helper()
	d, err := s.Begin(context.Background(), stores.Request{KeyRef: k, Fingerprint: fp, Now: c.Now()})
	if err != nil {
		t.Fatalf("Begin(%s): %v", k, err)
	}
	return d
}

// done claims k and saves an answer, and returns the owner's token.
func done(t testing.TB, s stores.Store, c Clock, k stores.KeyRef, fp string) stores.Token {
	t.Helper()
	d := begin(t, s, c, k, fp)
	if d.Outcome != stores.Claimed {
		t.Fatalf("claim %s: %v", k, d.Outcome)
	}
	if err := s.Complete(context.Background(), k, d.Token, stores.Response{Status: 201, Body: "first"}); err != nil {
		t.Fatalf("save %s: %v", k, err)
	}
	return d.Token
}

func mustDefinite(t testing.TB, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, stores.ErrFenced) {
		t.Fatal(err)
	}
}
