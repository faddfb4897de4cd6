package report_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// A fenced save's trace line carries the store's own error text, so that
// "fenced" can be told apart: a lease that ended, a takeover, a foreign
// token.
func TestTraceShowsTheStoresError(t *testing.T) {
	h, l := history.New(), history.NewLedger()
	key := stores.KeyRef{Tenant: "t0", Key: "order-o000"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp", Now: now, ID: 1},
		Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "tok-1"}}, Call: 0, Return: int64(time.Millisecond)})
	h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Complete, Key: key, Token: "tok-1", Now: now.Add(time.Second), ID: 2},
		Output: models.Output{Fenced: true}, Call: int64(time.Second), Return: int64(time.Second + time.Millisecond),
		Err: "idempotency: fenced: lease of tok-1 ended at 00:00:00.100"})
	lines := strings.Join(report.TraceLines(h, l, key.String()), "\n")
	if !strings.Contains(lines, "→ fenced") || !strings.Contains(lines, "store said: idempotency: fenced: lease of tok-1 ended") {
		t.Fatalf("the fenced save's line does not carry the store's error:\n%s", lines)
	}
	if strings.Count(lines, "store said") != 1 {
		t.Fatalf("only the call that erred should carry an error:\n%s", lines)
	}
}
