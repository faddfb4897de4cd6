package check

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// porcupineOps turns the history into porcupine's form, copying each Prune
// only into the partitions of the keys it can act on. Leaving it out of
// the others is exact, not an approximation: a Prune changes nothing but
// lets a key that may have expired by its clock be gone (models.Step: any
// operation may see it gone past its retention; the Prune itself is the
// identity), and it always succeeds. So it can be left out of a key
//   - whose every operation is called after the Prune returned: it comes
//     first there, on an absent key, where it does nothing;
//   - whose every operation returned before it was called: it comes last,
//     where nothing observes it;
//   - that no record of which can be old enough at the Prune's time: a
//     record is created at a claim's decision time (or an unanswered
//     Begin's call time), so when the Prune's time is within Retention
//     minus Slack of the earliest of them, no state of the key may expire
//     then, and the Prune is the identity.
//
// A call the store declared not applied (models.Output.NotApplied) is the
// identity in the model (models.Step), so it is left out too, exactly.
//
// Copying every Prune into every key made a history of P prunes and K keys
// P×K operations larger. A key none of whose calls got an answer is left
// out whole (keySpan.answered). It also returns how many keys the history
// has.
func porcupineOps(m models.Config, ops []history.Op) ([]porcupine.Operation, int) {
	g := groupByKey(ops)
	x := newPruneIndex(g.prunes)
	out := make([]porcupine.Operation, 0, len(ops))
	for _, k := range g.order {
		out = append(out, keyPorcupineOps(m, g.keyed[k], x)...)
	}
	return out, len(g.order)
}

// upperBound is the number of elements of the sorted s that are at most v.
func upperBound(s []int64, v int64) int {
	i, found := slices.BinarySearch(s, v)
	for found && i < len(s) && s[i] == v {
		i++
	}
	return i
}

func porcupineOp(op history.Op) porcupine.Operation {
	return porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: op.Return}
}

// prunePorcupineOp is the copy of Prune op in key k's partition.
func prunePorcupineOp(op history.Op, k stores.KeyRef) porcupine.Operation {
	in := op.Input
	in.Key = k
	return porcupine.Operation{ClientId: op.Client, Input: in, Output: op.Output, Call: op.Call, Return: op.Return}
}

// keySpan is what porcupineOps needs to know of a key to place a Prune:
// when its operations start and end, and when a record of it can first
// have been created.
type keySpan struct {
	first, last int64     // earliest call, latest return
	created     time.Time // the earliest time a record of the key can have been created
	creates     bool      // some Begin may have created one
	// answered: some call on the key got an answer. A key none of whose
	// calls did (each failed or timed out: a store that refuses the key)
	// is linearizable by itself, every call having done nothing, and is
	// left out of porcupine's history: its search over such calls grows
	// with the subsets of tokens they may have used, and a store that
	// refused every key holding a NUL kept the checker busy for minutes
	// before it gave up, undecided.
	answered bool
}

// add widens the span with one of the key's operations (not a Prune).
func (sp *keySpan) add(op history.Op) {
	sp.first, sp.last = min(sp.first, op.Call), max(sp.last, op.Return)
	sp.answered = sp.answered || op.Output.Decided()
	if op.Input.Kind != models.Begin {
		return
	}
	var at time.Time
	switch {
	case op.Output.Unknown:
		at = op.Input.Now
	case op.Output.Decision.Outcome == stores.Claimed:
		at = op.Output.Decision.DecidedAt
	default:
		return
	}
	if !sp.creates || at.Before(sp.created) {
		sp.created, sp.creates = at, true
	}
}

// prunable reports whether the Prune can act on the key (see porcupineOps):
// it overlaps the key's operations in time, and a record of the key can be
// past its retention at the Prune's time.
func (sp keySpan) prunable(m models.Config, prune history.Op) bool {
	if sp.first > prune.Return || sp.last < prune.Call { // ties overlap, as in porcupine
		return false
	}
	return sp.creates && prune.Input.Now.Sub(sp.created) >= m.Retention-m.Slack
}

// checkLinearizable judges a part key by key (checkLinearizableByKey,
// within the run's deadline), and, when a page is asked for
// (Evidence.Keep) and the part is the run's first, keeps porcupine's
// drawing of it if it passes and is small enough to draw: the drawing of
// the whole history when the run is this one part (see linTally). The
// verdict never depends on the drawing: a drawing that runs out of time
// leaves the page without it, the verdict as it was.
func checkLinearizable(e Evidence, ops []history.Op, g grouped, deadline time.Time, first bool) linTally {
	model := models.Porcupine(e.Model)
	t := checkLinearizableByKey(e, model, ops, g, deadline)
	if !first || t.failed || t.interrupted || t.timedOut || !e.Keep || len(ops) > VisualizeCap {
		return t
	}
	pops, _ := porcupineOps(e.Model, ops)
	pops = reduceAll(e.Model, pops) // as the verdict's search: without them the drawing repeats a search that blew up
	v, done := search(e, func() verbose {
		res, info := porcupine.CheckOperationsVerbose(model, pops, e.LinTimeout)
		return verbose{res, info}
	})
	t.drew = true
	if done && v.res == porcupine.Ok {
		t.whole = keep(model, v.info, pops)
	}
	return t
}

// linTally is what the linearizability check found in a part, or in the
// parts merged so far: the calls on keys (ops) and the run's Prunes
// (prunes: every part has them all, so they are counted once), the keys,
// the calls the exact reductions merged, the keys a witness order
// settled, and how the search ended: some key not linearizable (failed,
// with the violations and, for a page, the drawing of the first failing
// part's failing keys), a key out of time (timedOut, naming the first
// part's slowKey), or an interrupt.
//
// A page (Evidence.Keep) of a run of one part is what it was before runs
// came in parts: the failing keys, or the whole history when it passes
// and is small enough to draw (whole: the first part, of at most
// VisualizeCap operations, draws itself, drew, and the drawing is dropped
// if a second part comes). A run of several parts passes on more calls
// than one history can hold, by definition too large to draw as one
// page: it keeps the note that it is (tooLargeToDraw), or, failing, the
// first failing part's drawing.
type linTally struct {
	ops, prunes, keys          int
	merged, replays, witnesses int
	failed                     bool
	vs                         []Violation
	failing                    *Linearization
	timedOut, interrupted      bool
	slowKey                    string
	drew                       bool
	whole                      *Linearization
}

// add merges o, the next part's tally, into t.
func (t *linTally) add(o linTally) {
	t.ops += o.ops
	t.prunes = max(t.prunes, o.prunes)
	t.keys += o.keys
	t.merged += o.merged
	t.replays += o.replays
	t.witnesses += o.witnesses
	if o.failed && !t.failed {
		t.failing = o.failing
	}
	t.failed = t.failed || o.failed
	t.vs = append(t.vs, o.vs...)
	t.timedOut = t.timedOut || o.timedOut
	if t.slowKey == "" {
		t.slowKey = o.slowKey
	}
	t.interrupted = t.interrupted || o.interrupted
	// Only the first part draws the whole of itself: a second part drops
	// that drawing, for the run is then more than the first part.
	t.drew, t.whole = o.drew, o.whole
}

// decide is the [Linearizable] result of a run's merged tally: a key
// that is not linearizable fails the run, even when another part's key
// ran out of time or the search was interrupted; otherwise an interrupt
// or a key out of time leaves it unknown. The failing keys are listed
// by key, as every checker lists its violations, whatever part they
// were in.
func (t linTally) decide(e Evidence) Result {
	switch {
	case t.failed:
		vs := t.vs
		if len(vs) == 0 {
			vs = []Violation{{Linearizable, "", "the history is not linearizable"}}
		}
		sortViolations(vs)
		r := result(Linearizable, vs, "")
		r.Linearization = t.failing
		return r
	case t.interrupted:
		return interruptedLin
	case t.timedOut:
		why := fmt.Sprintf("the check of %d keys ran out of its %v", t.keys, linCap*e.LinTimeout)
		if t.slowKey != "" {
			why = fmt.Sprintf("porcupine timed out after %v on the key %s", e.LinTimeout, t.slowKey)
		}
		return Result{Checker: Linearizable, Verdict: Unknown, Detail: why + mergedNote(t.merged, t.replays)}
	}
	ops := t.ops + t.prunes
	r := Result{Checker: Linearizable, Verdict: Pass, Detail: fmt.Sprintf("%d operations on %d keys linearizable%s%s", ops, t.keys,
		mergedNote(t.merged, t.replays), witnessNote(t.witnesses, t.keys)), Judged: ops}
	if e.Keep {
		r.Linearization = tooLargeToDraw(ops)
		if t.drew {
			r.Linearization = t.whole
		}
	}
	return r
}

// reduceKey applies the exact reductions to one key's porcupine
// operations before porcupine searches them: the unanswered Begins that
// nothing tells apart (mergeUnknowns), then the replays and the 409s that
// no order tells apart (mergeReplays, mergeInFlights). It returns how
// many unanswered Begins it left out, and how many replays and 409s.
func reduceKey(m models.Config, part []porcupine.Operation) (out []porcupine.Operation, unknowns, reads int) {
	part, unknowns = mergeUnknowns(m, part)
	part, replays := mergeReplays(part)
	part, inflight := mergeInFlights(m, part)
	return part, unknowns, replays + inflight
}

// reduceAll is reduceKey on every key of pops.
func reduceAll(m models.Config, pops []porcupine.Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(pops))
	for _, part := range models.PartitionByKey(pops) {
		part, _, _ = reduceKey(m, part)
		out = append(out, part...)
	}
	return out
}

// mergedNote says how many unanswered Begins mergeUnknowns left out, and
// how many replays and 409s mergeReplays and mergeInFlights did.
func mergedNote(n, replays int) string {
	var parts []string
	if n > 0 {
		parts = append(parts, fmt.Sprintf("%d unanswered Begins that nothing tells apart merged", n))
	}
	if replays > 0 {
		parts = append(parts, fmt.Sprintf("%d replays and 409s that no order tells apart merged", replays))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// checkLinearizableByKey checks a part one key at a time: each key's
// porcupine operations are made, checked and dropped, a few keys at once
// (one per CPU). A million calls then never exist as porcupine operations
// all at once (they were about half the peak memory of checking).
// porcupine checks a partitioned model key by key anyway, so the verdict
// is the same: the history is linearizable when every key's is, and one
// key that is not fails it (even when another key timed out).
//
// Each key has its own LinTimeout: a history is undecided because a key's
// search exploded, never because it has many keys or the machine is
// loaded. With one budget for the whole, a correct SQLite store's race of
// 454 keys at load 36 (11,643 calls) ended undecided. The whole check
// still stops at deadline, linCap LinTimeouts after it began, shared by
// every part of a run, so that no history keeps a run for hours.
func checkLinearizableByKey(e Evidence, model porcupine.Model, ops []history.Op, g grouped, deadline time.Time) linTally {
	t := linTally{keys: len(g.order)}
	for _, op := range ops {
		if op.Input.Kind == models.Prune {
			t.prunes++
		}
	}
	prunes := newPruneIndex(g.prunes) // read by every key's goroutine, never written
	t.ops = len(ops) - t.prunes
	failing := make([][]porcupine.Operation, len(g.order))
	var slowKey atomic.Value // the first key that timed out
	var timedOut, interrupted atomic.Bool
	var next, merged, replays, witnesses atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(g.order) {
					return
				}
				if closed(e.Done) {
					interrupted.Store(true)
					return
				}
				left := min(e.LinTimeout, time.Until(deadline))
				if left <= 0 { // porcupine reads a zero timeout as none
					timedOut.Store(true)
					return
				}
				part, u, r := reduceKey(e.Model, keyPorcupineOps(e.Model, g.keyed[g.order[i]], prunes))
				merged.Add(int64(u))
				replays.Add(int64(r))
				if witnessed(e.Model, part, e.Done) {
					witnesses.Add(1)
					continue
				}
				res, done := search(e, func() porcupine.CheckResult { return porcupine.CheckOperationsTimeout(model, part, left) })
				if !done {
					interrupted.Store(true)
					return
				}
				switch res {
				case porcupine.Illegal:
					failing[i] = part
				case porcupine.Unknown:
					timedOut.Store(true)
					slowKey.CompareAndSwap(nil, g.order[i].String())
				}
			}
		}()
	}
	wg.Wait()
	t.merged, t.replays, t.witnesses = int(merged.Load()), int(replays.Load()), int(witnesses.Load())
	t.timedOut, t.interrupted = timedOut.Load(), interrupted.Load()
	t.slowKey, _ = slowKey.Load().(string)
	var parts [][]porcupine.Operation
	n := 0
	for _, p := range failing {
		if p != nil {
			parts = append(parts, p)
			n += len(p)
		}
	}
	if len(parts) > 0 {
		t.failed = true
		t.vs, t.failing = linViolations(e, model, parts, n)
	}
	return t
}

// witnessNote says how many of the keys a witness order settled (see
// witnessed), when porcupine searched the others.
func witnessNote(n, keys int) string {
	if n == 0 || n == keys {
		return ""
	}
	return fmt.Sprintf("; %d of the keys by an order their answers give, the rest by porcupine's search", n)
}

// linViolations names the keys of parts (the partitions to look at, of n
// operations in all) whose histories are not linearizable, and in each the
// first call that no order allows, and keeps the failing keys for a page
// (Evidence.Keep; nil otherwise).
func linViolations(e Evidence, model porcupine.Model, parts [][]porcupine.Operation, n int) ([]Violation, *Linearization) {
	var vs []Violation
	var failing []porcupine.Operation
	for _, part := range parts {
		res, info := porcupine.CheckOperationsVerbose(model, part, e.LinTimeout)
		if res != porcupine.Illegal {
			continue
		}
		failing = append(failing, part...)
		k := part[0].Input.(models.Input).Key
		vs = append(vs, Violation{Linearizable, k.String(), fmt.Sprintf(
			"the key's history (%d calls) has no order the decision table allows: %s", len(part), explain(e.Model, part, info))})
	}
	if !e.Keep {
		return vs, nil
	}
	// The failing keys only, whatever their size: they are the evidence.
	// Without a failing key (a timeout in the per-key checks), the whole
	// history is too large to draw: say so.
	if len(failing) > 0 {
		_, info := porcupine.CheckOperationsVerbose(model, failing, e.LinTimeout)
		info.AddAnnotations(keyLabels(failing))
		return vs, &Linearization{Model: model, Info: info, Ops: len(failing)}
	}
	if n <= VisualizeCap {
		all := make([]porcupine.Operation, 0, n)
		for _, p := range parts {
			all = append(all, p...)
		}
		_, info := porcupine.CheckOperationsVerbose(model, all, e.LinTimeout)
		return vs, keep(model, info, all)
	}
	return vs, tooLargeToDraw(n)
}

// linCap bounds a whole linearizability check, in LinTimeouts: each key
// has one, and the keys together have this many.
const linCap = 10

// verbose is porcupine's verbose answer, as one value.
type verbose struct {
	res  porcupine.CheckResult
	info porcupine.LinearizationInfo
}

// interruptedLin is the linearizability result of a search stopped by an
// interrupt (Evidence.Done).
var interruptedLin = Result{Checker: Linearizable, Verdict: Unknown, Detail: "interrupted: porcupine's search was stopped before it decided"}

// search runs a porcupine check f, or gives it up when e.Done closes (the
// run was interrupted) and returns done false. porcupine takes no
// context, so a search given up goes on in its goroutine until its own
// timeout (LinTimeout) while the run ends.
func search[T any](e Evidence, f func() T) (v T, done bool) {
	if e.Done == nil {
		return f(), true
	}
	if closed(e.Done) {
		return v, false
	}
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v = <-ch:
		return v, true
	case <-e.Done:
		return v, false
	}
}

// VisualizeCap is the largest history, in porcupine operations, drawn in
// full by porcupine's visualisation when the checker finds nothing wrong:
// the page grows about 300 bytes per operation and drawing it took more
// time than checking (58% at 190k operations, a 59 MB page). A failing
// check always draws its failing keys.
const VisualizeCap = 20000

// Linearization is what a page of porcupine's visualisation needs from
// the linearizability check, kept when [Evidence.Keep] asks for it: the
// model and porcupine's linearization info of the operations to draw,
// each key's row labelled. TooLarge says instead that the check passed on
// more than [VisualizeCap] operations and nothing was kept: the page says
// why there is no drawing. The checker keeps the data and a report draws
// it, so that this package writes no HTML.
type Linearization struct {
	Model porcupine.Model
	Info  porcupine.LinearizationInfo
	// Ops is how many porcupine operations Info holds, or, TooLarge, how
	// many the history has.
	Ops      int
	TooLarge bool
}

// keep is what a page of info (the check of pops) needs, with a labelled
// row per key, or, past VisualizeCap operations, the note that there is
// none.
func keep(model porcupine.Model, info porcupine.LinearizationInfo, pops []porcupine.Operation) *Linearization {
	if len(pops) <= VisualizeCap {
		info.AddAnnotations(keyLabels(pops))
		return &Linearization{Model: model, Info: info, Ops: len(pops)}
	}
	return tooLargeToDraw(len(pops))
}

// tooLargeToDraw stands for the visualisation of a passing history of n
// operations, more than VisualizeCap.
func tooLargeToDraw(n int) *Linearization {
	return &Linearization{Ops: n, TooLarge: true}
}
