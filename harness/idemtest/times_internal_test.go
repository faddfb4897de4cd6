package idemtest

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// TestModelRetentionNoteSaysWhence: a server-clock store declaring a
// 30 s LockTTL and no retention was told the model test's retention was
// 2m0s while the scenarios said 10s, nothing saying why; the note says
// the model test's is four times the declared LockTTL.
func TestModelRetentionNoteSaysWhence(t *testing.T) {
	mt := timesFor(Factory{Clock: stores.ServerClock, LockTTL: 30 * time.Second})
	found := false
	for _, n := range mt.notes {
		if strings.Contains(n, "retention 2m0s (the model test's: 4 times the declared LockTTL") {
			found = true
		}
	}
	if !found {
		t.Errorf("notes %q do not say where the retention came from", mt.notes)
	}
	mt = timesFor(Factory{Clock: stores.ServerClock, LockTTL: 30 * time.Second, Retention: time.Hour})
	for _, n := range mt.notes {
		if strings.Contains(n, "retention") && !strings.Contains(n, "retention 1h0m0s (declared)") {
			t.Errorf("declared retention: %q", n)
		}
	}
}
