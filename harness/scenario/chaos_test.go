package scenario_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// TestChaosMemory: on the memory store only the client faults are
// possible; the others are listed as skipped, with the reason, and the
// correct store passes.
func TestChaosMemory(t *testing.T) {
	s := harnesstest.RunOne(t, harnesstest.Options(t, "memory", stores.Correct, "chaos"))
	if s.Verdict != check.Pass {
		t.Fatalf("verdict %s: %s %v", s.Verdict, s.Error, s.Violations)
	}
	if s.Faults["pause"] != 2 || s.Faults["crash"] != 2 {
		t.Errorf("faults %v, want the 2 planned client pauses and 2 crashes", s.Faults)
	}
	skipped := 0
	for _, l := range s.Schedule {
		if strings.Contains(l, "(skipped: ") {
			skipped++
		}
	}
	if skipped == 0 {
		t.Errorf("no fault listed as skipped on the memory store: %v", s.Schedule)
	}
	// And said beside the verdict, not only in the schedule: a chaos
	// without its server faults judged less than its name says.
	if !slices.ContainsFunc(s.Notes, func(n string) bool { return strings.Contains(n, "chaos injected no server-pause") }) {
		t.Errorf("the notes do not say the server faults were not injected: %q", s.Notes)
	}
}

// TestChaosOneClientMeetsTheNetwork: with a single client, that client
// goes through the proxy, so the network's fault windows meet its calls.
// Before, only odd client slots did: at --clients 1 no call went through
// it, every window waited its 30 s for traffic in vain, and chaos took
// 101 s on Redis and said its network faults hit nothing.
func TestChaosOneClientMeetsTheNetwork(t *testing.T) {
	o := harnesstest.Options(t, "redis", stores.Correct, "chaos")
	o.Clients, o.Keys = 1, 2
	s := harnesstest.RunOne(t, o)
	if s.Verdict != check.Pass {
		t.Fatalf("verdict %s: %s %v", s.Verdict, s.Error, s.Violations)
	}
	windows := 0
	for kind, n := range s.Faults {
		if strings.HasPrefix(kind, "net-") {
			windows += n
		}
	}
	if windows == 0 {
		t.Fatalf("faults %v: the seed's plan had no network fault window to test", s.Faults)
	}
	for _, n := range s.Notes {
		if strings.Contains(n, "hit no traffic") {
			t.Errorf("a network fault met no call of the one client: %s", n)
		}
	}
}
