package main

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/stores"
)

// TestDrawsTheStrictModes: a random-flag soak's draws set
// --strict-availability and --strict-retention (flags a user may set,
// under which a correct store must pass too) from the drawn seed, each
// on some draws and not others, and their command lines say so.
func TestDrawsTheStrictModes(t *testing.T) {
	backend, err := stores.Lookup("memory")
	if err != nil {
		t.Fatal(err)
	}
	base := harness.DefaultOptions()
	base.Backend = backend
	var avail, ret, neither int
	for n := range int64(60) {
		o, cmd := drawRun(1, n, base, drawBudget{Time: time.Minute, Calls: maxDrawCalls})
		if o.StrictAvailability != (o.Seed%3 == 0) || o.StrictRetention != (o.Seed%5 == 0) {
			t.Fatalf("draw %d, seed %d: strict availability %v, strict retention %v", n, o.Seed, o.StrictAvailability, o.StrictRetention)
		}
		if strings.Contains(cmd, " --strict-availability") != o.StrictAvailability || strings.Contains(cmd, " --strict-retention") != o.StrictRetention {
			t.Fatalf("draw %d: the command line does not say its strict modes: %s", n, cmd)
		}
		switch {
		case o.StrictAvailability:
			avail++
		case o.StrictRetention:
			ret++
		default:
			neither++
		}
	}
	if avail == 0 || ret == 0 || neither == 0 {
		t.Errorf("60 draws: %d strict on availability, %d on retention alone, %d neither; want some of each", avail, ret, neither)
	}
}
