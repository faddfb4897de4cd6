package httpload

import (
	"sync/atomic"
	"testing"
)

// TestFreshKeysDoNotRepeat: a pattern of one random hex digit has 16
// keys; the first 16 operations of two clients get 16 distinct ones (a
// pattern of few digits drew the same key for two operations, and the
// second went untested), and past them a used key comes back rather than
// the load stalling.
func TestFreshKeysDoNotRepeat(t *testing.T) {
	l := &Load{used: map[string]bool{}}
	var seq atomic.Int64
	a, b := newKeys("%1x", "run", 1, 0, &seq), newKeys("%1x", "run", 1, 1, &seq)
	seen := map[string]bool{}
	for i := 0; i < 16; i++ {
		k := a
		if i%2 == 1 {
			k = b
		}
		key := l.freshKey(k)
		if seen[key] {
			t.Fatalf("operation %d drew %q again", i, key)
		}
		seen[key] = true
	}
	if key := l.freshKey(a); !seen[key] {
		t.Fatalf("a 17th key %q from 16 possible", key)
	}
}
