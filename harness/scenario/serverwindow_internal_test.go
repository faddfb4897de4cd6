package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// TestUnmetServerFaultsAreSaid: a server pause that no recorded call
// overlapped is said (Env.NotTested); a call sent before it and answered
// after it began, or one still unknown, met it; calls that ended before it
// began or began after it ended did not.
func TestUnmetServerFaultsAreSaid(t *testing.T) {
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Minute}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const start, end = 10, 20 // the pause, in history time
	begin := models.Input{Kind: models.Begin}
	for _, c := range []struct {
		name string
		op   *history.Op
		met  bool
	}{
		{"no call", nil, false},
		{"a call over the pause", &history.Op{Input: begin, Call: start - 1, Return: end + 1}, true},
		{"a call still unknown", &history.Op{Input: begin, Call: start + 1, Return: history.Never}, true},
		{"a call after the pause", &history.Op{Input: begin, Call: end + 1, Return: end + 2}, false},
	} {
		env := NewEnv(Setup{Name: "store-faults", Store: mem, Config: cfg, Clients: 1, Keys: 1, Seed: 1, RandSeed: 1})
		env.Hist.AddOp(history.Op{Input: begin, Call: 0, Return: 1}) // before the pause
		env.Hist.AddFault(history.Fault{Client: -1, Kind: history.FaultServerPause, Failpoint: "server", Start: start, End: end})
		if c.op != nil {
			env.Hist.AddOp(*c.op)
		}
		sayUnmetServerFaults(env, "store-faults")
		notes := strings.Join(env.Record().NotTested, "\n")
		if said := strings.Contains(notes, "no store call was in flight while the server was paused"); said == c.met {
			t.Errorf("%s: notes %q, want a note: %v", c.name, notes, !c.met)
		}
	}
}
