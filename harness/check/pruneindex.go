package check

import (
	"math/bits"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
)

// pruneIndex holds a history's Prunes (applied ones, in call order) so
// that the Prunes a key's partition needs (prunesInPartition) are found in
// time that grows with the key's operations, not with the run's Prunes.
// A scheduled scenario run for a --duration makes keys and Prunes in
// proportion to its rounds, and each key lives until the run's final
// probe, so every Prune may act on every key: a scan of every Prune per
// key took 20 of the 21 CPU-seconds of checking a memory run of 16,000
// keys and 17,000 Prunes. For any run of consecutive Prunes it answers, in
// constant time, the latest return and the one with the latest clock (the
// first of equals): sparse tables, built once (P log P).
type pruneIndex struct {
	ps     []history.Op
	calls  []int64   // ps[i].Call, ascending
	maxRet [][]int64 // maxRet[j][i]: the latest Return of ps[i : i+2^j]
	latest [][]int32 // latest[j][i]: the index of the latest clock in ps[i : i+2^j], the first of equals
}

// newPruneIndex indexes prunes, which must be applied Prunes in call order
// (grouped.prunes).
func newPruneIndex(prunes []history.Op) *pruneIndex {
	x := &pruneIndex{ps: prunes, calls: make([]int64, len(prunes))}
	if len(prunes) == 0 {
		return x
	}
	ret := make([]int64, len(prunes))
	at := make([]int32, len(prunes))
	for i, p := range prunes {
		x.calls[i], ret[i], at[i] = p.Call, p.Return, int32(i)
	}
	x.maxRet, x.latest = [][]int64{ret}, [][]int32{at}
	for w := 1; 2*w <= len(prunes); w *= 2 {
		pr, pa := x.maxRet[len(x.maxRet)-1], x.latest[len(x.latest)-1]
		r, a := make([]int64, len(prunes)-2*w+1), make([]int32, len(prunes)-2*w+1)
		for i := range r {
			r[i], a[i] = max(pr[i], pr[i+w]), x.later(pa[i], pa[i+w])
		}
		x.maxRet, x.latest = append(x.maxRet, r), append(x.latest, a)
	}
	return x
}

// later is whichever of two Prunes has the later clock; of equals, a.
// Every caller passes the first of two runs' choices as a, and a is then
// no later in call order than b (when the runs overlap, b's run holds a
// only if a is also its first of equals), so of equals it is the first.
func (x *pruneIndex) later(a, b int32) int32 {
	if x.ps[b].Input.Now.After(x.ps[a].Input.Now) {
		return b
	}
	return a
}

// span answers for ps[lo:hi] (lo < hi): its latest return, and the index
// of its latest clock.
func (x *pruneIndex) span(lo, hi int) (maxRet int64, latest int) {
	j := bits.Len(uint(hi-lo)) - 1
	b := hi - 1<<j
	return max(x.maxRet[j][lo], x.maxRet[j][b]), int(x.later(x.latest[j][lo], x.latest[j][b]))
}

// prunesInPartition lists the prunes copied into a key's partition: each
// that can act on it (keySpan.prunable), except that the prunes falling in
// one gap between the key's operations, overlapping none of them in time,
// are one: the latest by its own clock. That is exact, not an
// approximation. In every order porcupine may pick, the prunes of one gap
// sit together, no operation of the key between them: an operation between
// two of them would have returned before the later one was called, so
// before the earlier one too (they have the same operations before them),
// and must come before both. A run of prunes with nothing between them
// leaves the key as it was or gone (models.Step: a Prune is the identity,
// and at its time the key may be gone once past its retention), and whether
// gone is allowed only grows with the prune's time (models.PastRetention):
// so the latest of them allows exactly what the run allows. A prune that
// overlaps an operation of the key (ties included, as in porcupine) is
// kept as it is. The prunes come out in call order, a gap's one where its
// first was.
//
// A scheduled scenario's manual clock runs far ahead of real time (a
// LockTTL a tick), and every key's final probe comes at the end of the run,
// so every Prune of the run could act on every key: with 983 keys and 1,964
// prunes, porcupine was given about two million operations, and a correct
// memory store's sched-retention ended undecided (porcupine timed out).
//
// The prunes with g of the key's operations returned before their call
// are a run of the call-ordered index: those whose call falls after the
// g-th return and no later than the next. Of them, those that return
// before the key's next call are in gap g. A run whose every Prune does
// (the usual case: no Prune overlaps an operation of the key) is judged
// whole from the index; a Prune's span test is the same for all of a gap
// (only the gaps between operations can act on the key), and its
// retention test only grows with its clock, so the gap's latest is kept
// exactly when any of the gap would be. Other runs are read Prune by
// Prune.
func (x *pruneIndex) prunesInPartition(m models.Config, sp keySpan, kops []history.Op) []history.Op {
	if len(x.ps) == 0 {
		return nil
	}
	n := len(kops)
	returns := make([]int64, n)
	calls := make([]int64, n)
	for i, op := range kops {
		returns[i], calls[i] = op.Return, op.Call
	}
	slices.Sort(returns)
	slices.Sort(calls)
	end := upperBound(x.calls, sp.last) // no later Prune overlaps the key's span
	var out []history.Op
	lo := 0
	for g := 0; g <= n && lo < end; g++ {
		hi := end
		if g < n {
			hi = min(end, upperBound(x.calls, returns[g]))
		}
		if lo >= hi {
			continue
		}
		maxRet, latest := x.span(lo, hi)
		if g == n || maxRet < calls[g] { // the whole run is in gap g
			if p := x.ps[latest]; sp.prunable(m, p) {
				out = append(out, p)
			}
			lo = hi
			continue
		}
		slot := -1 // the gap's place in out
		for _, p := range x.ps[lo:hi] {
			switch {
			case !sp.prunable(m, p):
			case p.Return >= calls[g]: // overlaps an operation of the key
				out = append(out, p)
			case slot < 0:
				slot = len(out)
				out = append(out, p)
			case p.Input.Now.After(out[slot].Input.Now):
				out[slot] = p
			}
		}
		lo = hi
	}
	return out
}

// keyPorcupineOps is one key's part of porcupineOps: its operations (kops,
// none a Prune) and a copy of each of the indexed Prunes that can act on
// it (prunesInPartition).
func keyPorcupineOps(m models.Config, kops []history.Op, x *pruneIndex) []porcupine.Operation {
	// A call the store declared not applied changed nothing: it is left
	// out (stores.ErrNotApplied).
	kops = slices.DeleteFunc(slices.Clone(kops), func(op history.Op) bool { return op.Output.NotApplied })
	if len(kops) == 0 {
		return nil
	}
	sp := keySpan{first: kops[0].Call, last: kops[0].Return}
	for _, op := range kops {
		sp.add(op)
	}
	if !sp.answered {
		return nil
	}
	ps := x.prunesInPartition(m, sp, kops)
	out := make([]porcupine.Operation, 0, len(kops)+len(ps))
	for _, op := range kops {
		out = append(out, porcupineOp(op))
	}
	for _, p := range ps {
		out = append(out, prunePorcupineOp(p, kops[0].Input.Key))
	}
	return out
}
