package scenario_test

import (
	"strings"
	"testing"

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
