package workload

import "testing"

// TestNewRandRepeats: a seed gives one stream, another seed another, and
// the values are what rand.Rand promises (non-negative, within bounds).
func TestNewRandRepeats(t *testing.T) {
	a, b, c := NewRand(7), NewRand(7), NewRand(8)
	same := 0
	for i := 0; i < 1000; i++ {
		x, y, z := a.Int63(), b.Int63(), c.Int63()
		if x != y {
			t.Fatalf("draw %d: seed 7 gave %d and %d", i, x, y)
		}
		if x < 0 || z < 0 {
			t.Fatalf("draw %d: negative Int63 %d %d", i, x, z)
		}
		if x == z {
			same++
		}
		if n := a.Int63n(10); n < 0 || n >= 10 {
			t.Fatalf("Int63n(10) = %d", n)
		}
		b.Int63n(10)
		c.Int63n(10)
	}
	if same > 0 {
		t.Errorf("seeds 7 and 8 drew the same value %d times in 1000", same)
	}
}
