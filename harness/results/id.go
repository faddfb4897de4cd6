package results

import (
	"encoding/json"
	"fmt"
	"time"
)

// ID names one scenario run within a run: the scenario, and its
// repetition (--count, or a name listed twice; 0 for the first). Every
// file of a results directory that belongs to one scenario run
// (linearizability-<ID>.html, trace-<ID>.txt, its records in
// history.jsonl) is named by it, so two repetitions never share a file.
type ID struct {
	Scenario   string
	Repetition int
}

// String is the ID as files name it: the scenario's name for the first
// repetition (as every run of one repetition names its files), then
// "<name>.2", "<name>.3", …
func (id ID) String() string {
	if id.Repetition == 0 {
		return id.Scenario
	}
	return fmt.Sprintf("%s.%d", id.Scenario, id.Repetition+1)
}

// Duration is a time.Duration that travels in JSON as Go's duration text
// ("250ms", "10s"), so a summary.json reads as a person writes it and a
// reader gets the duration back typed, never a string to parse. It also
// reads a number, as nanoseconds.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String is the duration's text.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration's text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration's text, or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("a duration is a string such as \"250ms\" or a number of nanoseconds: %s", b)
		}
		*d = Duration(n)
		return nil
	}
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
