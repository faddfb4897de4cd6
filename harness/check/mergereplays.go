package check

import (
	"cmp"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// mergeReplays returns one key's porcupine operations (part) with the
// replays that no order can tell apart merged into one call each, and how
// many calls it left out. Twenty clients that retry an order while its
// owner saves, and get its answer replayed, made porcupine try every
// subset of their replays before each other order: a memory store's race
// of 22 clients (48 calls on one key) ran out of its 60 s budget, and the
// run ended undecided. The reduction is exact: the history it returns is
// linearizable if and only if part is (docs/DESIGN.md §8, "Replays"):
//
//   - A replay of answer X for fingerprint F is legal exactly in the states
//     that hold a saved record of F with answer X, at any time
//     (models.Decide; retention only adds states where it is not), and it
//     leaves the state as it was.
//   - When every save of X in the key's history is by one token, the
//     states holding X form one stretch of any linearization: X is written
//     by that token's save, once the claim is its, and a saved record only
//     leaves (retention) and never comes back with X, because a token is
//     never held twice.
//   - Replays of (F, X) whose calls all overlap (their latest call before
//     their earliest return) then fit at one point: if they are placed at
//     points p1..pk, each inside its own call, the stretch between the
//     smallest and largest p holds X, and it meets the common part of
//     their calls. So they are one call over that common part, and a
//     linearization of the merged history places them all there.
//
// Replays are grouped greedily by call time: each group's calls share a
// moment. Answers saved by more than one token are left alone.
func mergeReplays(part []porcupine.Operation) ([]porcupine.Operation, int) {
	saver := map[stores.Response]stores.Token{}
	shared := map[stores.Response]bool{}
	var replays []int
	for i, op := range part {
		in, out := op.Input.(models.Input), op.Output.(models.Output)
		switch {
		case in.Kind == models.Complete:
			if t, ok := saver[in.Response]; ok && t != in.Token {
				shared[in.Response] = true
			}
			saver[in.Response] = in.Token
		case isReplay(in, out):
			replays = append(replays, i)
		}
	}
	if len(replays) < 2 {
		return part, 0
	}
	type class struct {
		fp   string
		resp stores.Response
	}
	groups := map[class][]int{}
	for _, i := range replays {
		in, out := part[i].Input.(models.Input), part[i].Output.(models.Output)
		if !shared[out.Decision.Response] {
			c := class{in.Fingerprint, out.Decision.Response}
			groups[c] = append(groups[c], i)
		}
	}
	return mergeOverlapping(part, groups)
}

// mergeOverlapping merges, in each group of part's calls (indices), the
// calls whose calls share a moment into one call over it: greedily by
// call time, each call joining the one before while it was made before
// that one's (narrowed) return. It returns the calls left, and how many
// it left out. The groups are calls that no order tells apart (replays of
// one answer, 409s legal in one stretch): see mergeReplays.
func mergeOverlapping[K comparable](part []porcupine.Operation, groups map[K][]int) ([]porcupine.Operation, int) {
	drop := make([]bool, len(part))
	merged := 0
	out := slices.Clone(part)
	for _, idx := range groups {
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(part[a].Call, part[b].Call) })
		head := idx[0]
		for _, i := range idx[1:] {
			if part[i].Call <= out[head].Return {
				out[head].Call = part[i].Call // the latest call so far: sorted
				out[head].Return = min(out[head].Return, part[i].Return)
				drop[i] = true
				merged++
				continue
			}
			head = i
		}
	}
	if merged == 0 {
		return part, 0
	}
	kept := out[:0]
	for i, op := range out {
		if !drop[i] {
			kept = append(kept, op)
		}
	}
	return kept, merged
}

// isReplay reports whether a call is a Begin answered with a replay.
func isReplay(in models.Input, out models.Output) bool {
	return in.Kind == models.Begin && !out.Unknown && !out.NotApplied && out.Decision.Outcome == stores.Replay
}
