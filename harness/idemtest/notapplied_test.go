package idemtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/internal/rapidrec"
	"github.com/idemcheck/idemcheck/stores"
)

// declining wraps a store whose every every-th call is refused with
// stores.ErrNotApplied, as a database refuses a transaction that could
// not be serialized: before it acts, or (lying) after. Bad keys are
// refused as the store refuses them (the key is checked first).
type declining struct {
	stores.Store
	every int64
	after bool  // act, then say not applied: a lie
	err   error // the refusal (nil: stores.ErrNotApplied)
	n     atomic.Int64
	// shared, when set, counts the calls of every store the factory
	// opened, instead of n: one refusal in every calls in all.
	shared *atomic.Int64
}

func (d *declining) refuse(k stores.KeyRef, act func() error) error {
	count := &d.n
	if d.shared != nil {
		count = d.shared
	}
	if stores.ValidateKey(k) != nil || count.Add(1)%d.every != 0 {
		return act()
	}
	if d.after {
		_ = act()
	}
	if d.err != nil {
		return d.err
	}
	return stores.ErrNotApplied
}

func (d *declining) Begin(ctx context.Context, r stores.Request) (dec stores.Decision, err error) {
	err = d.refuse(r.KeyRef, func() error { dec, err = d.Store.Begin(ctx, r); return err })
	if err != nil {
		return stores.Decision{}, err
	}
	return dec, nil
}

func (d *declining) Complete(ctx context.Context, k stores.KeyRef, tok stores.Token, resp stores.Response) error {
	return d.refuse(k, func() error { return d.Store.Complete(ctx, k, tok, resp) })
}

func (d *declining) Release(ctx context.Context, k stores.KeyRef, tok stores.Token) error {
	return d.refuse(k, func() error { return d.Store.Release(ctx, k, tok) })
}

func (d *declining) Prune(ctx context.Context, now time.Time) (n int, err error) {
	err = d.refuse(stores.KeyRef{Tenant: "t", Key: "prune"}, func() error { n, err = d.Store.Prune(ctx, now); return err })
	return n, err
}

// decliningFactory is tinyFactory's correct store behind declining.
func decliningFactory(every int64, after bool) idemtest.Factory {
	f := tinyFactory(false)
	open := f.Open
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		s, err := open(cfg)
		return &declining{Store: s, every: every, after: after}, err
	}
	return f
}

// TestNotAppliedIsNoOp: a correct store that refuses every third call as
// not applied passes the model test: each refusal is a call that did
// nothing, not an error of the test.
func TestNotAppliedIsNoOp(t *testing.T) {
	idemtest.ModelTest(t, decliningFactory(3, false))
}

// firstRefused wraps a store that refuses its first n calls (with a
// valid key) as not applied, then applies every call: each model case
// opens a store, so a case of n calls or fewer has every call refused.
type firstRefused struct {
	stores.Store
	n, calls int
}

func (f *firstRefused) refuse(k stores.KeyRef) bool {
	if stores.ValidateKey(k) != nil {
		return false
	}
	f.calls++
	return f.calls <= f.n
}

func (f *firstRefused) Begin(ctx context.Context, r stores.Request) (stores.Decision, error) {
	if f.refuse(r.KeyRef) {
		return stores.Decision{}, stores.ErrNotApplied
	}
	return f.Store.Begin(ctx, r)
}

func (f *firstRefused) Complete(ctx context.Context, k stores.KeyRef, tok stores.Token, resp stores.Response) error {
	if f.refuse(k) {
		return stores.ErrNotApplied
	}
	return f.Store.Complete(ctx, k, tok, resp)
}

func (f *firstRefused) Release(ctx context.Context, k stores.KeyRef, tok stores.Token) error {
	if f.refuse(k) {
		return stores.ErrNotApplied
	}
	return f.Store.Release(ctx, k, tok)
}

// TestShortCasesAllRefusedPass: a correct store whose first calls are
// refused as not applied passes the model test although its shortest
// cases have every call refused: nothing applied is judged over the
// whole test. Each such case failed it ("answered every call not
// applied"), and a store refusing a third of its calls at random failed
// 2 runs of 2.
func TestShortCasesAllRefusedPass(t *testing.T) {
	f := tinyFactory(false)
	open := f.Open
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		s, err := open(cfg)
		return &firstRefused{Store: s, n: 3}, err
	}
	idemtest.ModelTest(t, f)
}

// TestNotAppliedThatActedFails: a store that says not applied after it
// acted fails the model test (a claim it denies, a save it denies).
func TestNotAppliedThatActedFails(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.ModelTest(t, decliningFactory(3, true))
		return
	}
	wantSuiteFails(t, "TestNotAppliedThatActedFails", "--- FAIL: TestNotAppliedThatActedFails", "not applied")
}

// TestNothingAppliedFails: a store that refuses every call has judged
// nothing, and fails.
func TestNothingAppliedFails(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.ModelTest(t, decliningFactory(1, false))
		return
	}
	wantSuiteFails(t, "TestNothingAppliedFails", "--- FAIL: TestNothingAppliedFails", "nothing was judged")
}

// erringFactory is tinyFactory's correct store whose every every-th call
// (counted over every store it opens) fails with an error that decides nothing (a dropped connection),
// before it acts.
func erringFactory(every int64) idemtest.Factory {
	f := tinyFactory(false)
	open := f.Open
	var calls atomic.Int64
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		s, err := open(cfg)
		return &declining{Store: s, every: every, err: errors.New("read tcp: connection reset by peer"), shared: &calls}, err
	}
	return f
}

// TestUnknownErrorEndsACase: a correct store whose calls now and then
// fail with an error that decides nothing (the contract lets any call
// fail so) passes the model test: each such call ends its case, whose
// rest the model cannot follow. One whose every call fails so is not
// judged: the test skips, saying why, never passes in silence.
func TestUnknownErrorEndsACase(t *testing.T) {
	idemtest.ModelTest(t, erringFactory(500))
	if os.Getenv(childEnv) == "1" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEveryCallErring$", "-test.v", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), childEnv+"=1", "IDEM_RESULTS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- SKIP: TestEveryCallErring") || !strings.Contains(string(out), "not judged: the store failed a call") {
		t.Errorf("a store whose every call errs: %v\n%s", err, out)
	}
	// A CI gate that wants every test judged says so, and the skip
	// fails: without -v a skip printed "ok".
	cmd = exec.Command(os.Args[0], "-test.run=^TestEveryCallErring$", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), childEnv+"=1", "IDEM_RESULTS="+t.TempDir(), idemtest.RequireJudgedEnv+"=1")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--- FAIL: TestEveryCallErring") || !strings.Contains(string(out), idemtest.RequireJudgedEnv+" is set") {
		t.Errorf("a store whose every call errs, %s set: %v\n%s", idemtest.RequireJudgedEnv, err, out)
	}
}

// TestEveryCallErring is TestUnknownErrorEndsACase's child: a store whose
// every call fails with an error that decides nothing.
func TestEveryCallErring(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestUnknownErrorEndsACase")
	}
	idemtest.ModelTest(t, erringFactory(1))
}

// TestEveryCallErringNamesTheError: a scenario on a store whose every
// call fails (a wrong address, a missing table) is undecided, and says
// the store's error, not only that its checkers could not decide.
func TestEveryCallErringNamesTheError(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.Run(t, erringFactory(1))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEveryCallErringNamesTheError$/^race$", "-test.v", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), childEnv+"=1", "IDEM_RESULTS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "store calls failed with an error that decides nothing; the first: Begin: read tcp: connection reset by peer") {
		t.Errorf("a store whose every call errs: %v\n%s", err, out)
	}
}

// TestModelOpenFailureIsNoCase: a store that cannot be opened (its
// server down) fails the model test saying so, once, and rapid finds no
// failing case in it: it saved the connection error as a case to replay,
// which the README says to commit, with a hint to declare the lease.
func TestModelOpenFailureIsNoCase(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		f := tinyFactory(false)
		f.Open = func(stores.Config) (stores.Store, error) {
			return nil, errors.New("dial tcp 127.0.0.1:6399: connect: connection refused")
		}
		idemtest.ModelTest(t, f)
		return
	}
	wantSuiteFails(t, "TestModelOpenFailureIsNoCase", "--- FAIL: TestModelOpenFailureIsNoCase", "the store could not be opened (Factory.Open: dial tcp")
	cmd := exec.Command(os.Args[0], "-test.run=^TestModelOpenFailureIsNoCase$", "-test.v", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), childEnv+"=1", "IDEM_RESULTS="+t.TempDir())
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "[rapid] failed after") || strings.Contains(string(out), "declare them") {
		t.Errorf("an open failure was a failing case of rapid's, or got the lease hint:\n%s", out)
	}
}

// TestModelPropertyOfNothingApplied: the exported ModelProperty, run by
// rapid.Check without ModelTest, fails a store that refuses every call
// (rapid finds no case that judged anything) and passes a correct one
// refusing every third: it passed both once the count moved to ModelTest.
func TestModelPropertyOfNothingApplied(t *testing.T) {
	if failed, report := rapidrec.Check(t.Name(), idemtest.ModelProperty(decliningFactory(1, false), "")); !failed {
		t.Errorf("a store refusing every call passed ModelProperty:\n%s", report)
	}
	if failed, report := rapidrec.Check(t.Name(), idemtest.ModelProperty(decliningFactory(3, false), "")); failed {
		t.Errorf("a correct store refusing every third call failed ModelProperty:\n%s", report)
	}
}
