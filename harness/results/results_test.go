package results

import (
	"encoding/json"
	"testing"
	"time"
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
