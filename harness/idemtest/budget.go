package idemtest

import (
	"fmt"
	"sync"
	"time"

	"pgregory.net/rapid"
)

// ModelTimeBudget bounds how long the model test starts new cases. A
// store whose Begin waits for a live claim (a row lock, a lock polled)
// spends its wait at every in-flight answer, and the model test makes
// one call at a time: a Postgres store waiting 5 s took 670 s for its
// cases, past `go test`'s default -timeout of 10 minutes, which fails
// the whole package. Past the budget the cases left do nothing and the
// test says how many ran; a case that failed is shrunk whole, the budget
// aside.
const ModelTimeBudget = 3 * time.Minute

// modelBudget is ModelTimeBudget, shortened by tests.
var modelBudget = ModelTimeBudget

// caseBudget counts the model test's cases against its budget.
type caseBudget struct {
	mu       sync.Mutex
	start    time.Time
	ran, cut int
	failed   bool // a case failed: the cases after it (its shrinking) run whole
}

// begin reports whether a case may run (and counts it either way).
func (b *caseBudget) begin() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.start.IsZero() {
		b.start = time.Now()
	}
	if !b.failed && time.Since(b.start) > modelBudget {
		b.cut++
		return false
	}
	b.ran++
	return true
}

// end notes, deferred in a case, whether it failed.
func (b *caseBudget) end(rt *rapid.T) {
	if rt.Failed() {
		b.mu.Lock()
		b.failed = true
		b.mu.Unlock()
	}
}

// note says how many cases the budget left out; "" when none.
func (b *caseBudget) note() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cut == 0 {
		return ""
	}
	return fmt.Sprintf("model: %d case(s) ran within the model test's time budget of %v (idemtest.ModelTimeBudget), %d more were left out: the store's calls took %v a case on average (a Begin that waits for a live claim costs its wait at every in-flight answer; -rapid.checks sets how many are drawn)",
		b.ran, modelBudget, b.cut, (time.Since(b.start) / time.Duration(max(b.ran, 1))).Round(time.Millisecond))
}
