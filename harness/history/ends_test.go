package history

import "testing"

// TestEndsBeside: the calls ending in a window, bounds included, less the
// key's own unanswered ones, and answering only when most answered.
func TestEndsBeside(t *testing.T) {
	e := NewEnds([]int64{30, 10, 20}, []int64{25, 15, 40})
	for _, tc := range []struct {
		from, to      int64
		own           int
		ok, failed    int
		wantAnswering bool
	}{
		{10, 20, 0, 2, 1, true},  // 10, 20 answered; 15 not
		{10, 20, 1, 2, 0, true},  // 15 is the key's own
		{15, 25, 0, 1, 2, false}, // 20 answered; 15, 25 not
		{31, 50, 1, 0, 0, false}, // none answered: nothing to go by
		{21, 40, 5, 1, 0, true},  // own never drives failed below zero
		{11, 19, 0, 0, 1, false}, // only a failure
		{20, 25, 0, 1, 1, false}, // a tie is not most
		{0, 100, 0, 3, 3, false}, // half and half
		{0, 100, 2, 3, 1, true},  // two of the failures were the key's
		{41, 41, 0, 0, 0, false}, // empty
		{40, 40, 0, 0, 1, false}, // a bound is in
		{30, 30, 0, 1, 0, true},  // likewise
	} {
		ok, failed, answering := e.Beside(tc.from, tc.to, tc.own)
		if ok != tc.ok || failed != tc.failed || answering != tc.wantAnswering {
			t.Errorf("Beside(%d, %d, %d) = %d, %d, %v; want %d, %d, %v", tc.from, tc.to, tc.own, ok, failed, answering, tc.ok, tc.failed, tc.wantAnswering)
		}
	}
}

// TestSilenceAdd: the run of unanswered calls counts from the first after
// the last answer, and an answer ends it.
func TestSilenceAdd(t *testing.T) {
	var s Silence
	for _, c := range []struct {
		answered bool
		call     int64
		n        int
		from     int64
	}{{false, 10, 1, 10}, {false, 20, 2, 10}, {true, 30, 0, 10}, {false, 40, 1, 40}, {false, 50, 2, 40}} {
		s.Add(c.answered, c.call)
		if s.N != c.n || (s.N > 0 && s.From != c.from) {
			t.Fatalf("after a call at %d (answered %v): %+v, want %d from %d", c.call, c.answered, s, c.n, c.from)
		}
	}
}
