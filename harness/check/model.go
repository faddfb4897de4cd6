package check

import (
	"time"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// ServerClockSlack is how far the model widens the LockTTL and retention
// boundaries either way for a server-clock store. The history's times are
// the harness's; the store decides by the server's clock, read at some
// moment inside the call and stored in milliseconds, so a decision within
// a few milliseconds of a boundary may go either way.
const ServerClockSlack = 5 * time.Millisecond

// ModelFor is the model a store is judged by: its LockTTL and retention,
// with ServerClockSlack for server-clock stores. It is the one place the
// model's parameters are made, for every run, hunt and demo.
func ModelFor(clock stores.ClockSource, cfg stores.Config, sem stores.Semantics) models.Config {
	m := models.Config{LockTTL: cfg.LockTTL, Retention: cfg.Retention, Semantics: sem, Clock: clock}
	if clock == stores.ServerClock {
		m.Slack = ServerClockSlack
	}
	return m
}

// Params are what the checkers judge a history by besides the history
// itself: the model's parameters and the client id of the final liveness
// probes. A saved run keeps them (summary.json) beside its history
// (history.jsonl), so it can be re-checked later with the current checkers.
type Params struct {
	LockTTL     time.Duration `json:"lock_ttl_ns"`
	Retention   time.Duration `json:"retention_ns"`
	Slack       time.Duration `json:"slack_ns,omitempty"`
	ProbeClient int           `json:"probe_client"`
	// Unprobed are the keys (stores.KeyRef.String) the final probe left
	// out: a claim on them may still be held, and waiting out the lease
	// was past what the run may wait (harness.Options.ProbeWait).
	// Liveness does not judge them (Evidence.Unprobed).
	Unprobed []string `json:"unprobed,omitempty"`
	// LeakProbe is the client id of the leak probes (nil: none), and
	// StrictRetention makes a leak a violation (see checkRetention).
	LeakProbe       *int `json:"leak_probe,omitempty"`
	StrictRetention bool `json:"strict_retention,omitempty"`
	// StrictAvailability makes unavailability under contention a
	// violation (see checkAvailability).
	StrictAvailability bool `json:"strict_availability,omitempty"`
	// Semantics are the store's declared choices (stores.Semantics). A
	// declared Fence is code, not data: a re-check goes without it (fences
	// a store gives as stores.Decision.Fence are in the history, and a
	// re-check judges them).
	Semantics stores.Semantics `json:"semantics,omitempty"`
	// Clock is whose clock the store declares it decides by
	// (models.Config.Clock); empty in a run saved before it was kept,
	// which a re-check then judges as a caller-clock store's.
	Clock stores.ClockSource `json:"clock,omitempty"`
}

// Model is the model the params describe.
func (p Params) Model() models.Config {
	return models.Config{LockTTL: p.LockTTL, Retention: p.Retention, Slack: p.Slack, Semantics: p.Semantics, Clock: p.Clock}
}
