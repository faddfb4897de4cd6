package lease_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/lease"
	"github.com/idemcheck/idemcheck/stores/storetest"
)

// factory is the lease store as its author would hand it to idemtest:
// with what it declares beyond the contract.
func factory(sem stores.Semantics, fence stores.Fence) idemtest.Factory {
	return idemtest.Factory{Name: "lease", Clock: stores.ServerClock, Semantics: sem, Fence: fence,
		WaitsAnnounced: true, // one mutex, never held across a failpoint
		Open: func(cfg stores.Config) (stores.Store, error) {
			s, err := lease.New(cfg, nil)
			if err != nil {
				return nil, err
			}
			return s, nil
		}}
}

// TestConformance: with its declarations, the lease store passes the whole
// suite: the model test and every scenario that applies.
func TestConformance(t *testing.T) {
	idemtest.Run(t, factory(lease.Semantics, lease.Fence))
}

// TestNeedsItsDeclarations: without each of its declarations the same
// store fails the model test: the declarations are what makes a correct
// but stricter store pass, not a loosening of the suite.
func TestNeedsItsDeclarations(t *testing.T) {
	for name, drop := range map[string]func(*stores.Semantics){
		"lease-bound writes":        func(s *stores.Semantics) { s.LeaseBoundWrites = false },
		"release keeps fingerprint": func(s *stores.Semantics) { s.ReleaseKeepsFingerprint = false },
		"all":                       func(s *stores.Semantics) { *s = stores.Semantics{} },
	} {
		t.Run(name, func(t *testing.T) {
			sem := lease.Semantics
			drop(&sem)
			msg := idemtest.ExpectFailure(t, factory(sem, lease.Fence), stores.Correct)
			if !strings.Contains(msg, "model forbids") {
				t.Fatalf("the failure does not come from the model:\n%s", msg)
			}
		})
	}
}

// ignoresLease is the lease store with its per-request lease broken: every
// claim gets LockTTL whatever the request asked for.
type ignoresLease struct{ *lease.Store }

func (s ignoresLease) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	req.Lease = 0
	return s.Store.Begin(ctx, req)
}

// TestDeclarationsAreHeldToTheirWord: a store that declares per-request
// leases but gives every claim LockTTL fails the model test: a declaration
// is a promise the suite checks, not only a licence.
func TestDeclarationsAreHeldToTheirWord(t *testing.T) {
	f := factory(lease.Semantics, lease.Fence)
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		s, err := lease.New(cfg, nil)
		if err != nil {
			return nil, err
		}
		return ignoresLease{s}, nil
	}
	if msg := idemtest.ExpectFailure(t, f, stores.Correct); !strings.Contains(msg, "model forbids") {
		t.Fatalf("the failure does not come from the model:\n%s", msg)
	}
}

// TestMutantsDie: each of the lease store's mutants fails the model test,
// and fence-not-incremented only because the store declares its fence;
// request-clock, which the model test cannot see (it stamps a server-clock
// store's requests with the real time), shows its shared counterexample
// (stores/storetest) instead, and the correct store does not.
func TestMutantsDie(t *testing.T) {
	// What each mutant's failure must say: the check that caught it.
	caughtBy := map[string]string{
		"fence-not-incremented":        "fencing",
		"takeover-ignores-fingerprint": "model forbids",
	}
	for _, m := range lease.Mutants {
		t.Run(m, func(t *testing.T) {
			if bug, ok := storetest.Bugs[m]; ok && caughtBy[m] == "" {
				for _, v := range []string{m, stores.Correct} {
					cfg := stores.Config{LockTTL: time.Second, Retention: time.Hour, Variant: v}
					s, err := lease.New(cfg, nil)
					if err != nil {
						t.Fatal(err)
					}
					happened, seen := bug(t, s, storetest.Clock{Now: time.Now, Advance: time.Sleep}, cfg)
					t.Logf("%s: %s", v, seen)
					if happened != (v == m) {
						t.Errorf("%s: the bug happened: %t, want %t", v, happened, v == m)
					}
				}
				return
			}
			want, ok := caughtBy[m]
			if !ok {
				t.Fatalf("mutant %s: no expected failure", m)
			}
			msg := idemtest.ExpectFailure(t, factory(lease.Semantics, lease.Fence), m)
			if !strings.Contains(msg, want) {
				t.Fatalf("not caught (no %q in the failure):\n%s", want, msg)
			}
		})
	}
}

// TestFenceIsParsed: the store's tokens carry their fencing number.
func TestFenceIsParsed(t *testing.T) {
	if n, ok := lease.Fence("42.abcdef"); !ok || n != 42 {
		t.Errorf("Fence(42.abcdef) = %d, %v", n, ok)
	}
	if _, ok := lease.Fence("opaque"); ok {
		t.Error("an opaque token parsed")
	}
}

// TestModelBesideAnotherClock: the lease store on a clock that reads
// ahead of the test's, or behind it, as a database on another host does,
// passes the model test: the suite reads the store's clock off its
// decisions (a Postgres 20 ms ahead of the host failed the model test
// because the suite dated its Prune by the host's clock).
func TestModelBesideAnotherClock(t *testing.T) {
	for _, off := range []time.Duration{20 * time.Millisecond, -20 * time.Millisecond, 2 * time.Second, -2 * time.Second} {
		t.Run(off.String(), func(t *testing.T) {
			t.Parallel() // each waits on the real clock
			f := factory(lease.Semantics, lease.Fence)
			f.Open = func(cfg stores.Config) (stores.Store, error) {
				return lease.New(cfg, func() time.Time { return time.Now().Add(off) })
			}
			idemtest.ModelTest(t, f)
		})
	}
}
