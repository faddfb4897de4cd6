package idemtest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
)

// tinyStore is a store written outside idemcheck's packages, the way a user
// would: one map under one mutex. With unfenced set it saves responses
// without checking the token: the classic unfenced-save bug.
type tinyStore struct {
	cfg      stores.Config
	unfenced bool
	mu       sync.Mutex
	rows     map[stores.KeyRef]*tinyRow
	// lives, when set, gives each claim a fencing number and its lease end
	// as fields of its decision: a counter per key that lives until a
	// prune finds it past the retention (see lifefence_test.go).
	lives *fenceLives
}

type tinyRow struct {
	fp, token        string
	done             bool
	resp             stores.Response
	locked, creation time.Time
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *tinyStore) Begin(_ context.Context, r stores.Request) (stores.Decision, error) {
	if err := stores.ValidateKey(r.KeyRef); err != nil {
		return stores.Decision{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := stores.Decision{DecidedAt: r.Now}
	row, ok := s.rows[r.KeyRef]
	switch {
	case !ok:
		row = &tinyRow{fp: r.Fingerprint, token: newToken(), locked: r.Now, creation: r.Now}
		s.rows[r.KeyRef] = row
		d.Outcome, d.Token = stores.Claimed, stores.Token(row.token)
		s.lives.claim(&d, r.KeyRef, r.Now, s.cfg.LockTTL)
	case row.fp != r.Fingerprint:
		d.Outcome = stores.Mismatch
	case row.done:
		d.Outcome, d.Response = stores.Replay, row.resp
	case r.Now.Sub(row.locked) < s.cfg.LockTTL:
		d.Outcome = stores.InFlight
	default:
		row.token, row.locked = newToken(), r.Now
		d.Outcome, d.Token, d.Takeover = stores.Claimed, stores.Token(row.token), true
		s.lives.claim(&d, r.KeyRef, r.Now, s.cfg.LockTTL)
	}
	return d, nil
}

func (s *tinyStore) write(k stores.KeyRef, tok stores.Token, f func(*tinyRow)) error {
	if err := stores.ValidateKey(k); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row, ok := s.rows[k]
	if !ok || (!s.unfenced && (row.done || row.token != string(tok))) {
		return stores.ErrFenced
	}
	f(row)
	return nil
}

func (s *tinyStore) Complete(_ context.Context, k stores.KeyRef, tok stores.Token, resp stores.Response) error {
	return s.write(k, tok, func(r *tinyRow) { r.done, r.resp = true, resp })
}

func (s *tinyStore) Release(_ context.Context, k stores.KeyRef, tok stores.Token) error {
	if err := stores.ValidateKey(k); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row, ok := s.rows[k]
	if !ok || row.done || row.token != string(tok) {
		return stores.ErrFenced
	}
	delete(s.rows, k)
	s.lives.released(k)
	return nil
}

func (s *tinyStore) Prune(_ context.Context, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, r := range s.rows {
		if now.Sub(r.creation) >= s.cfg.Retention {
			delete(s.rows, k)
			n++
		}
	}
	s.lives.prune(s.rows, now, s.cfg.Retention)
	return n, nil
}

func (s *tinyStore) Close() error { return nil }

func tinyFactory(unfenced bool) idemtest.Factory {
	return idemtest.Factory{Name: "tiny", Clock: stores.CallerClock,
		Open: func(cfg stores.Config) (stores.Store, error) {
			return &tinyStore{cfg: cfg, unfenced: unfenced, rows: map[stores.KeyRef]*tinyRow{}}, nil
		}}
}

// TestThirdPartyStorePasses: a correct store from outside passes the suite.
func TestThirdPartyStorePasses(t *testing.T) {
	t.Parallel() // its time is the scenarios' waits; a store of its own
	idemtest.Run(t, tinyFactory(false))
}

// TestBrokenThirdPartyStore runs the suite on the unfenced store in a child
// test process and checks that it fails, naming the checker, the key and
// the report.
func TestBrokenThirdPartyStore(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.Run(t, tinyFactory(true))
		return
	}
	wantSuiteFails(t, "TestBrokenThirdPartyStore", "--- FAIL: TestBrokenThirdPartyStore/model", "--- FAIL: TestBrokenThirdPartyStore/takeover",
		"fencing on key ", "report: ", "report.md")
}

// childEnv marks a test process started by wantSuiteFails.
const childEnv = "IDEMTEST_CHILD"

// wantSuiteFails runs the test named test in a child test process, where
// it runs the suite on a store that must fail it, and checks that the
// child failed and said each of want. Where want names the subtests that
// must fail ("--- FAIL: <test>/<subtest>"), the child runs those alone
// (childRun): each must fail and say the rest of want there.
func wantSuiteFails(t *testing.T, test string, want ...string) {
	t.Helper()
	// The child saves no failing case of its own (-rapid.nofailfile):
	// the cases kept as regression seeds are read all the same.
	cmd := exec.Command(os.Args[0], "-test.run="+childRun(test, want), "-test.v", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), childEnv+"=1", "IDEM_RESULTS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed the store of %s:\n%s", test, out)
	}
	text := string(out)
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", text)
	}
}

// childRun is the -test.run pattern of wantSuiteFails' child: test, and
// of its subtests only those that want says must fail ("--- FAIL:
// <test>/<subtest>"). The rest of the suite is not what the child is run
// to show, and was most of its time (TestFixedLeaseUndeclared: 21.6 s,
// 0.9 s with its two subtests). Where want names no subtest, or names the
// test itself as failing, the whole test runs.
func childRun(test string, want []string) string {
	prefix := "--- FAIL: " + test
	var subs []string
	for _, w := range want {
		if !strings.HasPrefix(w, prefix) {
			continue
		}
		sub, ok := strings.CutPrefix(w, prefix+"/")
		if !ok || sub == "" {
			return "^" + regexp.QuoteMeta(test) + "$"
		}
		subs = append(subs, regexp.QuoteMeta(sub))
	}
	if len(subs) == 0 {
		return "^" + regexp.QuoteMeta(test) + "$"
	}
	return "^" + regexp.QuoteMeta(test) + "$/^(" + strings.Join(subs, "|") + ")$"
}

// quietRelease is a store whose Release answers ok when it changes
// nothing (the lesson card's "0 rows changed: leave it"), instead of
// ErrFenced. With anyToken, its Release also deletes a claim that is not
// the caller's: the unfenced-release bug, quietly.
type quietRelease struct {
	stores.Store
	anyToken bool
}

func (q quietRelease) Release(ctx context.Context, k stores.KeyRef, tok stores.Token) error {
	if t, ok := q.Store.(*tinyStore); ok && q.anyToken {
		t.mu.Lock()
		defer t.mu.Unlock()
		if row, ok := t.rows[k]; ok && !row.done {
			delete(t.rows, k)
		}
		return nil
	}
	if err := q.Store.Release(ctx, k, tok); !errors.Is(err, stores.ErrFenced) {
		return err
	}
	return nil
}

// quietFactory is tinyFactory's correct store with a quiet Release,
// declared as such or not.
func quietFactory(declared, anyToken bool) idemtest.Factory {
	f := tinyFactory(false)
	open := f.Open
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		s, err := open(cfg)
		return quietRelease{s, anyToken}, err
	}
	f.Semantics.QuietRelease = declared
	// A name of its own: its suite runs beside tinyFactory's
	// (t.Parallel), and a scenario's results directory is named by
	// the time to the millisecond, the store and the scenario.
	f.Name = "tiny-quiet"
	return f
}

// TestQuietRelease: a correct store whose Release answers ok when it
// changes nothing passes once it declares QuietRelease.
func TestQuietRelease(t *testing.T) {
	t.Parallel() // its time is the scenarios' waits; a store of its own
	idemtest.Run(t, quietFactory(true, false))
}

// TestQuietReleaseUndeclared: the same store, undeclared, fails, and the
// failure names the declaration.
func TestQuietReleaseUndeclared(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.Run(t, quietFactory(false, false))
		return
	}
	wantSuiteFails(t, "TestQuietReleaseUndeclared", "--- FAIL: TestQuietReleaseUndeclared/model", "QuietRelease: true")
}

// TestQuietReleaseStillFenced: declaring QuietRelease does not let a
// Release delete another's claim.
func TestQuietReleaseStillFenced(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.Run(t, quietFactory(true, true))
		return
	}
	wantSuiteFails(t, "TestQuietReleaseStillFenced", "--- FAIL: TestQuietReleaseStillFenced/model")
}

// errorsTB records the errors a helper reports instead of failing.
type errorsTB struct {
	testing.TB
	errs []string
}

func (e *errorsTB) Helper() {}
func (e *errorsTB) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// TestRequire: a factory with no address or network cannot run network,
// and Require says so; it can run race, and Require is quiet.
func TestRequire(t *testing.T) {
	tb := &errorsTB{TB: t}
	idemtest.Require(tb, tinyFactory(false), "race", "network")
	if len(tb.errs) != 1 || !strings.Contains(tb.errs[0], "network") {
		t.Fatalf("Require reported %q; want one error about network", tb.errs)
	}
	// Scenarios Run would skip once it started them: heartbeat on a store
	// that renews no lease, takeover past the wait budget at a declared
	// lease of minutes (both passed Require once).
	tb = &errorsTB{TB: t}
	idemtest.Require(tb, tinyFactory(false), "heartbeat")
	if len(tb.errs) != 1 || !strings.Contains(tb.errs[0], "does not renew leases") {
		t.Errorf("Require on heartbeat without stores.Extender reported %q", tb.errs)
	}
	// At a production lease the store's missing Extender is the reason,
	// not the wait budget: the budget's advice (keep the suite's
	// LockTTL) judges nothing on a store that renews no lease.
	tb = &errorsTB{TB: t}
	prod := tinyFactory(false)
	prod.LockTTL = 30 * time.Second
	idemtest.Require(tb, prod, "heartbeat")
	if len(tb.errs) != 1 || !strings.Contains(tb.errs[0], "does not renew leases") {
		t.Errorf("Require on heartbeat without stores.Extender at a 30s lease reported %q", tb.errs)
	}
	f := tinyFactory(false)
	f.LockTTL = 5 * time.Minute
	tb = &errorsTB{TB: t}
	idemtest.Require(tb, f, "takeover")
	if len(tb.errs) != 1 || !strings.Contains(tb.errs[0], "wait budget") {
		t.Errorf("Require on takeover at a 5m lease reported %q", tb.errs)
	}
}
