package sqlite

import (
	"strconv"
	"testing"
)

// TestSeenKeys: a key is seen from its second call on, one never met is
// seen only by a collision (rare in a table this size), and the table
// clears itself once half full rather than call every key seen.
func TestSeenKeys(t *testing.T) {
	s := newSeenKeys()
	if s.see("t", "k") {
		t.Fatal("a key met for the first time was seen before")
	}
	if !s.see("t", "k") {
		t.Fatal("a key met again was not seen before")
	}
	if s.see("t2", "k") || s.see("", "tk") {
		t.Error("the tenant and the key are not told apart")
	}
	// 1,000 new keys in a table of 2^20 bits collide about twice.
	collisions := 0
	for i := range 1_000 {
		if s.see("t", "other-"+strconv.Itoa(i)) {
			collisions++
		}
	}
	if collisions > 10 {
		t.Errorf("%d of 1,000 keys met for the first time were seen before", collisions)
	}
	for i := 0; s.see("t", "k"); i++ {
		if i > seenBits {
			t.Fatal("the table never clears")
		}
		s.see("t", "fill-"+strconv.Itoa(i))
	}
	if n := s.set.Load(); n > 1 {
		t.Errorf("%d bits counted set just after a clear", n)
	}
}
