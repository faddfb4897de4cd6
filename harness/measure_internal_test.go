package harness

import (
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// TestMeasureKeepsTheFirstUnknownError: a scenario's counts keep the
// error of its first call of unknown outcome, so that an undecided run
// names it (a Postgres container killed mid-run left 240 calls failing
// to connect, and the run said only that no final probe ran); a fault
// injector's lost answer and the client's own deadline are no store
// error, and are passed over.
func TestMeasureKeepsTheFirstUnknownError(t *testing.T) {
	h := history.New()
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	unknown := func(err string, lost, deadline bool) {
		h.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key}, Output: models.Output{Unknown: true},
			Call: 1, Return: history.Never, Err: err, Lost: lost, Deadline: deadline})
	}
	unknown("answer lost by the fault injector", true, false)
	unknown("context deadline exceeded", false, true)
	unknown("dial tcp 127.0.0.1:5432: connect: connection refused", false, false)
	unknown("another", false, false)
	var res results.ScenarioResult
	measure(&res, h, history.NewLedger(), scenario.Record{})
	if res.Outcomes["unknown"] != 4 || res.FirstUnknown != "dial tcp 127.0.0.1:5432: connect: connection refused" {
		t.Fatalf("unknown %d, first %q", res.Outcomes["unknown"], res.FirstUnknown)
	}
}
