package idemtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
)

// busyBegins is a correct store a third of whose Begins fail before they
// act, with an error that decides nothing (a busy database's).
type busyBegins struct {
	stores.Store
	n atomic.Int64
}

func (b *busyBegins) Begin(ctx context.Context, r stores.Request) (stores.Decision, error) {
	if b.n.Add(1)%3 == 0 {
		return stores.Decision{}, errors.New("database is locked")
	}
	return b.Store.Begin(ctx, r)
}

// TestPassLogsTheStoresErrors: a scenario that passes on a store many of
// whose calls failed logs how many did, with the first error and what to
// do about it: a pass with four calls in five failing said nothing of
// them, and its report, which did, was removed. (Run as a child, -v, to
// read its log.)
func TestPassLogsTheStoresErrors(t *testing.T) {
	f := tinyFactory(false)
	open := f.Open
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		s, err := open(cfg)
		return &busyBegins{Store: s}, err
	}
	f.Name = "tiny-busy"
	if os.Getenv(childEnv) == "1" {
		idemtest.Run(t, f)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPassLogsTheStoresErrors$/^race$", "-test.v", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), childEnv+"=1", "IDEM_RESULTS="+t.TempDir())
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil || !strings.Contains(text, "--- PASS: TestPassLogsTheStoresErrors/race") {
		t.Fatalf("race on a correct store a third of whose Begins fail: %v\n%s", err, text)
	}
	if !strings.Contains(text, "note: ") || !strings.Contains(text, "store calls failed with an error that decides nothing; the first: Begin: database is locked") ||
		!strings.Contains(text, "stores.ErrNotApplied") {
		t.Fatalf("the pass does not log its store's errors:\n%s", text)
	}
}
