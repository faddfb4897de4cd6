package history

import (
	"math"
	"slices"
)

// Ends is when the calls of a history ended, answered or not, in time
// order: the liveness checkers ask it whether the server was answering
// while one key's calls went unanswered. No answer says nothing of a
// key's state; no answer to one key while the server answered most of the
// calls that ended beside it does (a row a leaked lock holds, a request
// parked on a key forever). A server answering no one, or a trickle (its
// machine starved, its network cut), leaves the key unjudged.
type Ends struct {
	answered, unanswered []int64
}

// NewEnds takes the end times of the answered calls (their returns) and
// of the unanswered ones (their errors), in any order.
func NewEnds(answered, unanswered []int64) Ends {
	slices.Sort(answered)
	slices.Sort(unanswered)
	return Ends{answered: answered, unanswered: unanswered}
}

// Beside counts the calls that ended in [from, to], less own unanswered
// ones (the key's own, which ended there too), and says whether the
// server was answering then: at least one answered, more answered than
// not, and so many that the key's own calls in a row (at least one) all
// going unanswered at the others' rate is not to be expected (under
// silenceOdds). A link that lost half of all answers, whatever the key
// (scripts/lossy-exec.py at LOSS=0.5), left a key's 8 probes in a
// row unanswered while 7 of 13 other calls were answered: at that rate
// one key in 256 is so, and a correct store failed liveness.
func (e Ends) Beside(from, to int64, own int) (ok, failed int, answering bool) {
	ok = within(e.answered, from, to)
	failed = max(within(e.unanswered, from, to)-own, 0)
	if ok == 0 || ok <= failed {
		return ok, failed, false
	}
	rate := float64(failed) / float64(ok+failed) // the others' calls without an answer
	return ok, failed, math.Pow(rate, float64(max(own, 1))) < silenceOdds
}

// Apart is [Ends.Beside] for calls none of which is the key's own (the
// fresh keys sent beside a key's probes): it counts the calls that ended
// in [from, to] and says whether the key's own calls in a row (own, at
// least one) all failing at their rate is not to be expected.
func (e Ends) Apart(from, to int64, own int) (ok, failed int, answering bool) {
	ok, failed = within(e.answered, from, to), within(e.unanswered, from, to)
	if ok == 0 || ok <= failed {
		return ok, failed, false
	}
	return ok, failed, math.Pow(float64(failed)/float64(ok+failed), float64(max(own, 1))) < silenceOdds
}

// silenceOdds is how unlikely a key's own unanswered calls in a row must
// be, at the rate the others' calls went unanswered, for the silence to
// be the key's and not the server's: one key in ten thousand.
const silenceOdds = 1e-4

// Silence is the run of one key's calls that went unanswered since its
// last answer: the own calls and the start [Ends.Beside] takes.
type Silence struct {
	N    int   // unanswered calls in a row
	From int64 // when the first of them was called
}

// Add notes the key's next call, in call order: an answer ends the run.
func (s *Silence) Add(answered bool, call int64) {
	switch {
	case answered:
		s.N = 0
	case s.N == 0:
		s.N, s.From = 1, call
	default:
		s.N++
	}
}

// within counts the times of sorted ts in [from, to].
func within(ts []int64, from, to int64) int {
	i, _ := slices.BinarySearch(ts, from)
	j, _ := slices.BinarySearch(ts, to+1)
	return j - i
}
