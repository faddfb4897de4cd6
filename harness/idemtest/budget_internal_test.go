package idemtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/internal/rapidrec"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// slowBegins is a correct store whose every Begin takes a while, as one
// that waits for a live claim does.
type slowBegins struct{ stores.Store }

func (s slowBegins) Begin(ctx context.Context, r stores.Request) (stores.Decision, error) {
	time.Sleep(20 * time.Millisecond)
	return s.Store.Begin(ctx, r)
}

// TestModelTestKeepsItsTimeBudget: a store whose Begin waits took the
// model test past go test's -timeout; past its budget the cases left do
// nothing, the test passes on those that ran and says how many were
// left out.
func TestModelTestKeepsItsTimeBudget(t *testing.T) {
	defer func(b time.Duration) { modelBudget = b }(modelBudget)
	modelBudget = 500 * time.Millisecond
	f := Factory{Name: "slow-memory", Clock: stores.CallerClock, Open: func(cfg stores.Config) (stores.Store, error) {
		s, err := memory.New(cfg)
		return slowBegins{s}, err
	}}
	var u unknownCases
	start := time.Now()
	failed, report := rapidrec.Check(t.Name()+"-correct", modelProperty(f, "", &u))
	if failed {
		t.Fatalf("the correct store failed:\n%s", report)
	}
	if n := u.budget.note(); !strings.Contains(n, "time budget of 500ms") || u.budget.cut == 0 || u.budget.ran == 0 {
		t.Errorf("ran %d, cut %d in %v: note %q", u.budget.ran, u.budget.cut, time.Since(start), n)
	}
	// Past the budget, a case that failed before has its shrinking run
	// whole.
	b := caseBudget{start: time.Now().Add(-time.Hour), failed: true}
	if !b.begin() {
		t.Error("a case after a failure was left out past the budget")
	}
}
