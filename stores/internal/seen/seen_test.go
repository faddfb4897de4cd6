package seen

import (
	"strconv"
	"testing"
)

// TestKeys: a key is seen from its second call on, one never met is
// seen only by a collision (rare in a table this size), and the table
// clears itself once half full rather than call every key seen.
func TestKeys(t *testing.T) {
	s := New()
	if s.See("t", "k") {
		t.Fatal("a key met for the first time was seen before")
	}
	if !s.See("t", "k") {
		t.Fatal("a key met again was not seen before")
	}
	if s.Seen("t", "m") {
		t.Fatal("a key never marked was seen")
	}
	s.Mark("t", "m")
	for range 2 { // Seen leaves the mark
		if !s.Seen("t", "m") {
			t.Fatal("a key marked was not seen")
		}
	}
	if s.See("t2", "k") || s.See("", "tk") {
		t.Error("the tenant and the key are not told apart")
	}
	// 1,000 new keys in a table of 2^20 bits collide about twice.
	collisions := 0
	for i := range 1_000 {
		if s.See("t", "other-"+strconv.Itoa(i)) {
			collisions++
		}
	}
	if collisions > 10 {
		t.Errorf("%d of 1,000 keys met for the first time were seen before", collisions)
	}
	for i := 0; s.See("t", "k"); i++ {
		if i > Bits {
			t.Fatal("the table never clears")
		}
		s.See("t", "fill-"+strconv.Itoa(i))
	}
	if n := s.set.Load(); n > 1 {
		t.Errorf("%d bits counted set just after a clear", n)
	}
}

// TestKeysAreTheSameInEveryTable: two tables given the same keys in the
// same order answer alike, collisions included (10,000 keys in 2^20 bits
// collide about 48 times), so a scheduled run's paths do not depend on
// the process it runs in.
func TestKeysAreTheSameInEveryTable(t *testing.T) {
	a, b := New(), New()
	collisions := 0
	for i := range 10_000 {
		k := "key-" + strconv.Itoa(i)
		x, y := a.See("t", k), b.See("t", k)
		if x != y {
			t.Fatalf("key %d: one table says seen=%v, the other %v", i, x, y)
		}
		if x {
			collisions++
		}
	}
	if collisions == 0 {
		t.Fatal("no collision among 10,000 keys: the tables agreed only on misses, which proves nothing")
	}
}
