package sqlite

import (
	"strconv"
	"testing"
)

// TestSeenKeys: a key added is seen, one never added is seen only by a
// collision (rare in a table this size), and the table clears itself once
// half full rather than call every key seen.
func TestSeenKeys(t *testing.T) {
	s := newSeenKeys()
	if s.has("t", "k") {
		t.Fatal("a key never added is seen")
	}
	s.add("t", "k")
	if !s.has("t", "k") {
		t.Fatal("a key added is not seen")
	}
	if s.has("t2", "k") || s.has("", "tk") {
		t.Error("the tenant and the key are not told apart")
	}
	collisions := 0
	for i := range 10_000 {
		if s.has("t", "other-"+strconv.Itoa(i)) {
			collisions++
		}
	}
	if collisions > 10 {
		t.Errorf("%d of 10,000 keys never added are seen", collisions)
	}
	for i := 0; s.has("t", "k"); i++ {
		if i > seenBits {
			t.Fatal("the table never clears")
		}
		s.add("t", "fill-"+strconv.Itoa(i))
	}
	if n := s.set.Load(); n > 1 {
		t.Errorf("%d bits counted set just after a clear", n)
	}
}
