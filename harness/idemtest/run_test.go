package idemtest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
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
	case row.fp != r.Fingerprint:
		d.Outcome = stores.Mismatch
	case row.done:
		d.Outcome, d.Response = stores.Replay, row.resp
	case r.Now.Sub(row.locked) < s.cfg.LockTTL:
		d.Outcome = stores.InFlight
	default:
		row.token, row.locked = newToken(), r.Now
		d.Outcome, d.Token, d.Takeover = stores.Claimed, stores.Token(row.token), true
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
	idemtest.Run(t, tinyFactory(false))
}

// TestBrokenThirdPartyStore runs the suite on the unfenced store in a child
// test process and checks that it fails, naming the checker, the key and
// the report.
func TestBrokenThirdPartyStore(t *testing.T) {
	if os.Getenv("IDEMTEST_BROKEN_CHILD") == "1" {
		idemtest.Run(t, tinyFactory(true))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenThirdPartyStore$", "-test.v")
	cmd.Env = append(os.Environ(), "IDEMTEST_BROKEN_CHILD=1", "IDEM_RESULTS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed an unfenced store:\n%s", out)
	}
	text := string(out)
	for _, want := range []string{"--- FAIL: TestBrokenThirdPartyStore/model", "--- FAIL: TestBrokenThirdPartyStore/takeover",
		"fencing on key ", "report: ", "report.md"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", text)
	}
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
}
