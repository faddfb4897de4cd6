package results

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

func TestIDNamesRepetitionsApart(t *testing.T) {
	for id, want := range map[ID]string{
		{Scenario: "race"}:                      "race",
		{Scenario: "race", Repetition: 1}:       "race.2",
		{Scenario: "sched-race", Repetition: 9}: "sched-race.10",
		{Scenario: "retention", Repetition: 0}:  "retention",
	} {
		if got := id.String(); got != want {
			t.Errorf("%#v: %q, want %q", id, got, want)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(ScenarioResult{Name: "race", LockTTL: Duration(250 * time.Millisecond), Retention: Duration(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var back ScenarioResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.LockTTL.D() != 250*time.Millisecond || back.Retention.D() != 10*time.Second {
		t.Errorf("round trip of %s gave LockTTL %v, retention %v", b, back.LockTTL, back.Retention)
	}
	for in, want := range map[string]time.Duration{`"1.5s"`: 1500 * time.Millisecond, `250000000`: 250 * time.Millisecond, `""`: 0} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.D() != want {
			t.Errorf("%s: %v (%v), want %v", in, d, err, want)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"ten seconds"`), &d); err == nil {
		t.Error("a duration that does not parse was accepted")
	}
}

// TestWriteWidth: a run's files are written a core's worth of scenarios
// at once, but one at a time once a history has spilled to disk (its
// parts are loaded whole while they are written).
func TestWriteWidth(t *testing.T) {
	mem, spilled := history.New(), history.New()
	if err := spilled.SpillTo(t.TempDir(), 1024); err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		op := history.Op{Client: 1, Call: int64(i), Return: int64(i) + 1,
			Input: models.Input{Kind: models.Begin, Key: stores.KeyRef{Tenant: "t", Key: fmt.Sprint("k", i)}}}
		mem.AddOp(op)
		spilled.AddOp(op)
	}
	if !spilled.Spilled() {
		t.Fatal("a history of 3000 calls keeping 1024 did not spill")
	}
	sum := &Summary{Scenarios: make([]ScenarioResult, 3)}
	sum.Scenarios[0].Attach(mem, nil)
	if got, want := sum.WriteWidth(), runtime.GOMAXPROCS(0); got != want {
		t.Errorf("in memory: width %d, want GOMAXPROCS %d", got, want)
	}
	sum.Scenarios[2].Attach(spilled, nil)
	if got := sum.WriteWidth(); got != 1 {
		t.Errorf("with a spilled history: width %d, want 1", got)
	}
}
