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
		{10, 20, 0, 2, 1, false}, // 10, 20 answered; 15 not: a third of the others unanswered, so may the key's call be
		{10, 20, 1, 2, 0, true},  // 15 is the key's own
		{15, 25, 0, 1, 2, false}, // 20 answered; 15, 25 not
		{31, 50, 1, 0, 0, false}, // none answered: nothing to go by
		{21, 40, 5, 1, 0, true},  // own never drives failed below zero
		{11, 19, 0, 0, 1, false}, // only a failure
		{20, 25, 0, 1, 1, false}, // a tie is not most
		{0, 100, 0, 3, 3, false}, // half and half
		{0, 100, 2, 3, 1, false}, // two of the failures were the key's; one in four of the others' too: two in a row is 1 in 16
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

// TestBesideOdds: a key's calls in a row without an answer are its own
// only where the others' calls went unanswered rarely enough: 8 in a
// row beside 7 answered of 13 (a link that loses half of all answers) is
// the server's; beside 99 answered of 100, the key's.
func TestBesideOdds(t *testing.T) {
	ends := func(ok, failed, own int) Ends { // the key's own calls end unanswered beside the others'
		var a, u []int64
		for i := range ok {
			a = append(a, int64(i))
		}
		for i := range failed + own {
			u = append(u, int64(i))
		}
		return NewEnds(a, u)
	}
	for _, tc := range []struct {
		ok, failed, own int
		want            bool
	}{
		{7, 6, 8, false},  // half lost: 1 in 256 keys has 8 in a row
		{99, 1, 8, true},  // one in a hundred: 8 in a row is the key's
		{99, 1, 1, false}, // one call of the key's, beside a failure in a hundred
		{40, 0, 1, true},  // every other call answered
		{3, 1, 8, true},   // one in four: 8 in a row is 1 in 65,536
	} {
		if _, _, got := ends(tc.ok, tc.failed, tc.own).Beside(0, 1000, tc.own); got != tc.want {
			t.Errorf("%d answered, %d not, the key's %d in a row: answering %v, want %v", tc.ok, tc.failed, tc.own, got, tc.want)
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

// TestEndsApart: calls none of which is the key's own are all counted
// (Beside takes the key's own failures off), and the key's refusals in
// a row are its own only where the others failed rarely enough.
func TestEndsApart(t *testing.T) {
	e := NewEnds([]int64{10, 20, 30}, []int64{15})
	for _, tc := range []struct {
		from, to   int64
		own        int
		ok, failed int
		want       bool
	}{
		{0, 100, 1, 3, 1, false}, // one in four failed: so may the key's one call
		{0, 100, 8, 3, 1, true},  // eight in a row at one in four: 1 in 65,536
		{11, 19, 8, 0, 1, false}, // nothing answered: nothing to go by
		{16, 30, 1, 2, 0, true},  // every other call answered
	} {
		ok, failed, answering := e.Apart(tc.from, tc.to, tc.own)
		if ok != tc.ok || failed != tc.failed || answering != tc.want {
			t.Errorf("Apart(%d, %d, %d) = %d, %d, %v; want %d, %d, %v", tc.from, tc.to, tc.own, ok, failed, answering, tc.ok, tc.failed, tc.want)
		}
	}
}
