package scenario_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/scenario"
)

// TestUnannouncedWaits: a store that declares it announces its waits,
// whose clients were nonetheless taken to be blocked inside it, gets a
// note that counts them and names the declaration; no note when none
// blocked, nor for a store that does not declare it (its short bound is
// the expected way to find a lock held by a parked client).
func TestUnannouncedWaits(t *testing.T) {
	eps := []scenario.EpisodeRecord{{Key: 0, Blocked: 2}, {Key: 1}, {Key: 2, Blocked: 1}}
	n := scenario.UnannouncedWaits(eps, true)
	for _, want := range []string{"3 time(s)", "WaitsAnnounced", "faults.Wait", "5s"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
	if n := scenario.UnannouncedWaits(eps, false); n != "" {
		t.Errorf("undeclared store: note %q, want none", n)
	}
	if n := scenario.UnannouncedWaits([]scenario.EpisodeRecord{{Key: 0}, {Key: 1}}, true); n != "" {
		t.Errorf("no client blocked: note %q, want none", n)
	}
}

// TestClockOutran: on a server-clock store, episodes whose real time
// between ticks reached LockTTL are counted, with the
// longest stretch, in a note that says the verdict stands; none when
// every stretch stayed short, or on a store with the harness's clock (no
// stretch measured).
func TestClockOutran(t *testing.T) {
	ttl := 100 * time.Millisecond
	eps := []scenario.EpisodeRecord{{Key: 0, Unticked: 30 * time.Millisecond}, {Key: 1, Unticked: 100 * time.Millisecond},
		{Key: 2, Unticked: 412 * time.Millisecond}}
	n := scenario.ClockOutran(eps, ttl)
	for _, want := range []string{"2 of 3 episode(s)", "412ms", "LockTTL (100ms)", "the verdict stands"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
	if n := scenario.ClockOutran([]scenario.EpisodeRecord{{Key: 0, Unticked: 99 * time.Millisecond}}, ttl); n != "" {
		t.Errorf("every stretch short of LockTTL: note %q, want none", n)
	}
	if n := scenario.ClockOutran([]scenario.EpisodeRecord{{Key: 0}, {Key: 1}}, ttl); n != "" {
		t.Errorf("no stretch measured: note %q, want none", n)
	}
}
