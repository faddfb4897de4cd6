package check

import (
	"cmp"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/models"
)

// witnessed reports whether one key's porcupine operations (part) are
// linearizable by a witness: an order of them, found greedily without
// backtracking, that real time allows and the model accepts. Each step
// takes, of the calls that may come next (none of the calls left returned
// before it was called: porcupine's rule, in which calls and returns at
// the same instant overlap), the first in order of preference that the
// model accepts from the states the key may be in (a set, stepped as
// porcupine's nondeterministic model steps it: stepAll). The preference is
// the time each call says it took effect: a decided Begin at the time it
// was decided (decidedPoint), any other call at its return (a write as
// late as it may be, so that the reads before it find the state they
// saw), or, on a second try, at its call. A witness found is a proof,
// made of the steps porcupine takes, so a key it settles is linearizable
// and porcupine's search over it is not needed. None found proves
// nothing: the key goes to porcupine, as before. Neither is found once
// done closes (an interrupt).
//
// It is the way out of the searches that blow up although the answer is
// plain. A correct Postgres store's race of 45 clients on one key, with a
// LockTTL shorter than its calls under load (Begins waited seconds for a
// connection), left 71 answers of 409 overlapping four claims: the
// answers only read, but porcupine tries the subsets of them placed
// before each claim, and ran out of its 60 s (2 of 3 runs undecided). The
// store's own clock had already ordered them.
//
// Bounds: a key of more than witnessOps calls is left to porcupine (each
// step looks at every call left), and so is a step whose states branch
// past witnessStates; each try gives up after witnessSteps calls stepped
// through the model (a step that may come next but the model refuses is
// tried again at the next step). A Postgres race of 166 clients on one
// key at a LockTTL of 87 ms recorded 4,433 calls on it (3,835 answers of
// 409, 291 claims, 290 fenced saves), which porcupine left undecided in
// 3 of 3 runs; the witness settles each in well under a second.
func witnessed(m models.Config, part []porcupine.Operation, done <-chan struct{}) bool {
	if len(part) == 0 {
		return true
	}
	if len(part) > witnessOps {
		return false
	}
	points := make([]int64, len(part))
	order := make([]int, len(part))
	for _, late := range []bool{true, false} {
		for i, op := range part {
			other := op.Call
			if late {
				other = op.Return
			}
			order[i], points[i] = i, min(max(decidedPoint(op, other), op.Call), op.Return)
		}
		slices.SortStableFunc(order, func(a, b int) int {
			if c := cmp.Compare(points[a], points[b]); c != 0 {
				return c
			}
			return cmp.Compare(part[a].Call, part[b].Call)
		})
		if greedyOrder(m, part, order, done) {
			return true
		}
	}
	return false
}

// witnessOps, witnessStates and witnessSteps bound a witness's search
// (see witnessed).
const (
	witnessOps    = 20000
	witnessStates = 64
	witnessSteps  = 2_000_000
)

// greedyOrder linearizes part greedily, preferring the calls in the order
// pref (indices into part), and reports whether it got through. It gives
// up (false) once done closes: the run was interrupted.
//
// The calls that may come next are those called no later than the
// earliest return of the calls left: that return is read from the calls
// sorted by return, past the ones taken, so a step costs the calls it
// tries, not a scan of every call left. A scan per step made a key of
// 20,000 calls 400 million comparisons a try, and a correct SQLite
// store's race of 128 clients on 200 keys (488,222 calls) was checked
// for more than ten minutes, deaf to its interrupt.
func greedyOrder(m models.Config, part []porcupine.Operation, pref []int, done <-chan struct{}) bool {
	left := slices.Clone(pref)
	byReturn := slices.Clone(pref)
	slices.SortFunc(byReturn, func(a, b int) int { return cmp.Compare(part[a].Return, part[b].Return) })
	taken := make([]bool, len(part))
	first := 0 // byReturn[first] is the untaken call that returns first
	states := []models.State{{}}
	steps := 0
	for len(left) > 0 {
		for taken[byReturn[first]] {
			first++
		}
		earliestReturn := part[byReturn[first]].Return
		took := -1
		for j, i := range left {
			op := part[i]
			if op.Call > earliestReturn {
				continue // a call left returned before this one was made
			}
			if steps++; steps > witnessSteps {
				return false
			}
			if steps%4096 == 0 && closed(done) {
				return false
			}
			if next := stepAll(m, states, op); len(next) > 0 && len(next) <= witnessStates {
				states, took = next, j
				break
			}
		}
		if took < 0 {
			return false
		}
		taken[left[took]] = true
		left = slices.Delete(left, took, took+1)
	}
	return true
}

// closed reports whether done is closed (a nil done never is).
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// stepAll is every state the key may be in after op, from any of states,
// each once (models.Equal).
func stepAll(m models.Config, states []models.State, op porcupine.Operation) []models.State {
	in, out := op.Input.(models.Input), op.Output.(models.Output)
	var next []models.State
	for _, s := range states {
		for _, n := range models.Step(m, s, in, out) {
			if !slices.ContainsFunc(next, func(x models.State) bool { return models.Equal(x, n) }) {
				next = append(next, n)
			}
		}
	}
	return next
}

// decidedPoint is where a decided Begin says it was decided, on the
// history's clock: its call time plus the time from when it was sent to
// its decision (both on the caller's clock, which a server-clock store's
// clock is too on one machine; on a caller-clock store the decision is
// the request's Now, and the point falls at the call). Any other call, or
// a Begin without those times, is at other.
func decidedPoint(op porcupine.Operation, other int64) int64 {
	in, out := op.Input.(models.Input), op.Output.(models.Output)
	if in.Kind != models.Begin || !out.Decided() || in.Sent.IsZero() || out.Decision.DecidedAt.IsZero() {
		return other
	}
	d := out.Decision.DecidedAt.Sub(in.Sent)
	if d < 0 || d > time.Duration(op.Return-op.Call) {
		return other
	}
	return op.Call + int64(d)
}
