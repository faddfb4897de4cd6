package sched

import (
	"fmt"
	"strings"
	"time"
)

// EventKind names what happened in a scheduled run.
type EventKind string

// The events a scheduler records, in order.
const (
	Granted   EventKind = "run"       // a parked client was let run
	Parked    EventKind = "park"      // a client reached a failpoint and waits
	Blocked   EventKind = "blocked"   // a client let run reached no failpoint within Block
	Finished  EventKind = "done"      // a client's body returned
	Acted     EventKind = "action"    // an action ran (a clock tick)
	Picked    EventKind = "pick"      // a value was picked (a clock skew)
	Statement EventKind = "statement" // a client ran a statement (faults.Trace)
	Note      EventKind = "note"      // the scheduler says something (Stmt holds it)
	Observed  EventKind = "observed"  // what Observe saw while no client ran (Value holds it)
)

// Event is one entry of a scheduled run's log.
type Event struct {
	Seq       int           `json:"seq"`
	Since     time.Duration `json:"since"` // since Run started
	Kind      EventKind     `json:"kind"`
	Client    string        `json:"client,omitempty"`
	Failpoint string        `json:"failpoint,omitempty"`
	Stmt      string        `json:"stmt,omitempty"`
	Result    string        `json:"result,omitempty"`
	Action    string        `json:"action,omitempty"`
	Pick      string        `json:"pick,omitempty"`
	Value     string        `json:"value,omitempty"`
}

// String prints the event on one line.
func (e Event) String() string {
	switch e.Kind {
	case Granted:
		return fmt.Sprintf("%s runs from %s", e.Client, e.Failpoint)
	case Parked:
		return fmt.Sprintf("%s waits at %s", e.Client, e.Failpoint)
	case Blocked:
		return fmt.Sprintf("%s is blocked inside the store", e.Client)
	case Finished:
		return fmt.Sprintf("%s is done", e.Client)
	case Acted:
		return "action: " + e.Action
	case Picked:
		return fmt.Sprintf("pick %s = %s", e.Pick, e.Value)
	case Statement:
		return fmt.Sprintf("%s: %s → %s", e.Client, oneLine(e.Stmt), e.Result)
	case Observed:
		return "observed: " + e.Value
	}
	return e.Stmt
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func (s *Scheduler) record(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Seq = len(s.log) + 1
	e.Since = time.Since(s.start)
	s.log = append(s.log, e)
}

// Log returns what happened so far, in order.
func (s *Scheduler) Log() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.log...)
}

// Decisions returns the scheduling decisions of the run: one line per
// client let run, action taken or value picked (a schedule's shape, without
// the statements).
func (s *Scheduler) Decisions() []string {
	var out []string
	for _, e := range s.Log() {
		switch e.Kind {
		case Granted:
			out = append(out, e.Client+"@"+e.Failpoint)
		case Acted:
			out = append(out, e.Action)
		case Picked:
			out = append(out, e.Pick+"="+e.Value)
		}
	}
	return out
}
