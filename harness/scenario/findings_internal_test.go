package scenario

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// TestFindingMeanOverRounds: a level found once a round (a rate) is the
// mean of its rounds, a count (Finding) their sum: fifteen rounds of
// stress reported fifteen times the rate any round reached.
func TestFindingMeanOverRounds(t *testing.T) {
	env := NewEnv(Setup{Name: "stress", Config: stores.Config{LockTTL: time.Second}, Clients: 1, Keys: 1, Seed: 1, RandSeed: 1})
	for _, rate := range []int{1000, 2000, 3000} {
		env.FindingMean("calls_per_s", rate)
		env.Finding("takeovers", 2)
	}
	f := env.Record().Findings
	if f["calls_per_s"] != 2000 || f["takeovers"] != 6 {
		t.Fatalf("findings %v: want the rate's mean, 2000, and the count's sum, 6", f)
	}
}
