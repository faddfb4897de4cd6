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

// TestServerWindowSaysWhenNoCallMetIt: a server fault's window that no
// recorded call overlapped is said (Env.NotTested); a call sent before
// it and answered after it opened, or one still unknown, met it; a call
// that ended before it opened did not.
func TestServerWindowSaysWhenNoCallMetIt(t *testing.T) {
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Minute}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	begin := models.Input{Kind: models.Begin}
	for _, c := range []struct {
		name string
		op   func(w *serverWindow) *history.Op // recorded once the window closed
		met  bool
	}{
		{"no call", func(*serverWindow) *history.Op { return nil }, false},
		{"a call over the window", func(w *serverWindow) *history.Op {
			return &history.Op{Input: begin, Call: w.start - 1, Return: w.end + 1}
		}, true},
		{"a call still unknown", func(w *serverWindow) *history.Op {
			return &history.Op{Input: begin, Call: w.start + 1, Return: history.Never}
		}, true},
		{"a call after the window", func(w *serverWindow) *history.Op {
			return &history.Op{Input: begin, Call: w.end + 1, Return: w.end + 2}
		}, false},
	} {
		env := NewEnv(Setup{Name: "store-faults", Store: mem, Config: cfg, Clients: 1, Keys: 1, Seed: 1, RandSeed: 1})
		env.Hist.AddOp(history.Op{Input: begin, Call: 0, Return: 1}) // before the window
		var w serverWindow
		time.Sleep(time.Millisecond)
		w.open(env)
		time.Sleep(time.Millisecond)
		w.close(env)
		if op := c.op(&w); op != nil {
			env.Hist.AddOp(*op)
		}
		w.say(env, "store-faults", "paused")
		notes := strings.Join(env.Record().NotTested, "\n")
		if said := strings.Contains(notes, "no store call was in flight while the server was paused"); said == c.met {
			t.Errorf("%s: notes %q, want a note: %v", c.name, notes, !c.met)
		}
	}
}
