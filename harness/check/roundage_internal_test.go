package check

import (
	"testing"
	"time"
)

// TestRoundAge: an age under a millisecond keeps its microseconds (a
// takeover 0.1 ms after the claim read "at most 0s"); one above rounds
// to the millisecond.
func TestRoundAge(t *testing.T) {
	for d, want := range map[time.Duration]string{100 * time.Microsecond: "100µs", 8*time.Millisecond + 300*time.Microsecond: "8ms"} {
		if got := roundAge(d).String(); got != want {
			t.Errorf("roundAge(%v) = %s, want %s", d, got, want)
		}
	}
}
