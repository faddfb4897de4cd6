package check

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// maxInFlightClaims bounds the claims of a key whose 409s mergeInFlights
// sorts into classes (a bit each).
const maxInFlightClaims = 64

// mergeInFlights returns one key's porcupine operations (part) with the
// Begins answered 409 (in flight) that no order can tell apart merged
// into one call each, and how many calls it left out. 256 clients racing
// for one key while its owner was taken over (the memory store's race at
// 256 clients, six claims and 742 answers of 409 on one key) made
// porcupine try every subset of the concurrent 409s before each other
// call: it ran out of its 60 s budget holding 2 GB, and the run ended
// undecided. The reduction is exact, by the argument mergeReplays makes
// for replays (docs/DESIGN.md §8, "Replays and 409s"):
//
//   - A 409 changes no state, and is legal exactly in the states where the
//     key is in flight under a claim whose lease had not surely run out at
//     its decision time (models.Decide says InFlight, or is ambiguous):
//     for each claim of the key, legal under it or not, by the claim's
//     token, decision time and lease alone. Its class is the set of claims
//     it is legal under, with its fingerprint.
//   - When every claim of the key is known (no Begin of unknown outcome)
//     and at most one was made without a takeover, no Release and no
//     Extend was called: every linearization is in flight in one stretch,
//     from the first claim to the first save (or its removal), with the
//     claims in the order of their decision times (a takeover is decided
//     a lease after the claim it ends), each claim's state unchanged until
//     the next.
//   - A class whose claims are consecutive in that order is then legal in
//     one stretch of any linearization, as a replay of one saved answer is;
//     and 409s of one class whose calls all overlap fit at one point: one
//     call over the common part of their calls.
//
// Keys that do not meet the conditions are left alone.
func mergeInFlights(m models.Config, part []porcupine.Operation) ([]porcupine.Operation, int) {
	type claim struct {
		at      int64 // decision time, Unix ns: the order of the stretch
		state   models.State
		created bool // made without a takeover
	}
	var claims []claim
	var inflight []int
	created := 0
	for i, op := range part {
		in, out := op.Input.(models.Input), op.Output.(models.Output)
		switch in.Kind {
		case models.Release, models.Extend:
			return part, 0
		case models.Begin:
			if out.Unknown {
				return part, 0 // it may have claimed: a claim nobody saw
			}
			if out.NotApplied {
				continue
			}
			d := out.Decision
			switch d.Outcome {
			case stores.Claimed:
				if !d.Takeover {
					created++
				}
				if cmp.Or(in.Lease, m.LockTTL) <= m.Slack {
					return part, 0 // a takeover need not come later than the claim it ends
				}
				claims = append(claims, claim{at: d.DecidedAt.UnixNano(), created: !d.Takeover,
					state: models.State{Exists: true, Fingerprint: in.Fingerprint, LockedAt: d.DecidedAt, CreatedAt: d.DecidedAt, Token: d.Token, Lease: in.Lease}})
			case stores.InFlight:
				inflight = append(inflight, i)
			}
		}
	}
	if created > 1 || len(inflight) < 2 || len(claims) == 0 || len(claims) > maxInFlightClaims {
		return part, 0
	}
	slices.SortFunc(claims, func(a, b claim) int { return cmp.Compare(a.at, b.at) })
	for i := 1; i < len(claims); i++ {
		if claims[i].at == claims[i-1].at || claims[i].created {
			return part, 0 // the order of the stretch is not pinned (or no linearization has one)
		}
	}
	type class struct {
		fp    string
		legal uint64 // a bit per claim, in the stretch's order
	}
	groups := map[class][]int{}
	for _, i := range inflight {
		in, out := part[i].Input.(models.Input), part[i].Output.(models.Output)
		var legal uint64
		for c, cl := range claims {
			exp := models.Decide(m, cl.state, in.Fingerprint, out.Decision.DecidedAt)
			if exp.Outcome == stores.InFlight || exp.Ambiguous { // as models.Step judges a 409
				legal |= 1 << c
			}
		}
		if legal == 0 || !consecutive(legal) {
			continue // legal nowhere (porcupine says so), or in two stretches: left alone
		}
		k := class{in.Fingerprint, legal}
		groups[k] = append(groups[k], i)
	}
	return mergeOverlapping(part, groups)
}

// consecutive reports whether the set bits of b (not 0) are one run.
func consecutive(b uint64) bool {
	b >>= uint(bits.TrailingZeros64(b))
	return b&(b+1) == 0
}
