package check

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Verdict is a checker's three-valued answer.
type Verdict string

// The verdicts: pass, fail, or unknown (the evidence could not decide);
// skipped is a scenario's verdict when it could not run at all.
const (
	Pass    Verdict = "pass"
	Fail    Verdict = "fail"
	Unknown Verdict = "unknown"
	Skipped Verdict = "skipped"
)

// Violation is one broken promise, on one key.
type Violation struct {
	Checker string `json:"checker"`
	Key     string `json:"key"`
	Detail  string `json:"detail"`
}

// Result is one checker's verdict on one scenario.
type Result struct {
	Checker    string      `json:"checker"`
	Verdict    Verdict     `json:"verdict"`
	Detail     string      `json:"detail"`
	Violations []Violation `json:"violations,omitempty"`
	// Linearization is what the linearizability checker kept for a page of
	// porcupine's visualisation when Evidence.Keep asked for it (nil
	// otherwise, and when it has nothing to draw). A page is drawn from it,
	// not saved with the result.
	Linearization *Linearization `json:"-"`
	// Judged counts what the checker judged, in the unit its Detail
	// names (orders and keys, work runs, accepted writes, replays,
	// reuses, probed keys, calls): 0 means it had nothing to judge, and a
	// scenario none of whose checkers judged anything is not a pass
	// ([Overall]).
	Judged int `json:"judged"`
}

// findingPrefix starts the Detail of a passing result that reports a
// finding (see [Result.Finding]).
const findingPrefix = "finding: "

// Finding is what a passing result reports beside its pass: an effect
// the contract allows and a user should see (a key kept past its
// retention, a store unavailable under contention), which strict mode
// makes a failure; "" when there is none.
func (r Result) Finding() string {
	if r.Verdict != Pass || !strings.HasPrefix(r.Detail, findingPrefix) {
		return ""
	}
	return strings.TrimPrefix(r.Detail, findingPrefix)
}

// Vacuous reports whether r passed having judged nothing ([Result.Judged]
// 0): a pass that says nothing, which the reports show apart.
func (r Result) Vacuous() bool { return r.Verdict == Pass && r.Judged == 0 }

// The checkers, by name.
const (
	AtMostOnce   = "at-most-once"
	Exclusive    = "exclusive-execution"
	Fencing      = "fencing"
	Replay       = "replay-fidelity"
	Mismatch     = "mismatch"
	Linearizable = "linearizability"
	Liveness     = "liveness"
	Retention    = "retention"
	Availability = "availability"
)

// Preference orders the checkers by how directly they name a bug:
// linearizability catches nearly every mutant but says least. A hunt and a
// demo name a mutant's killer by it.
var Preference = []string{AtMostOnce, Exclusive, Fencing, Mismatch, Liveness, Retention, Replay, Availability, Linearizable}

// Docs says what each checker proves, in the order Check runs them, for
// `idemcheck list` and reports.
var Docs = []struct{ Name, Doc string }{
	{AtMostOnce, "each order is charged at most once at the provider, and no key is claimed again after it was saved done (inside its retention)"},
	{Exclusive, "a key's work never overlaps with the work of a healthy (not paused, not crashed) owner, and a server-clock store never takes a claim over inside its lease"},
	{Fencing, "no write is accepted from a token that was superseded, and no token repeats for a key"},
	{Replay, "every replay equals a response that was saved, and every client got the same answer for a key"},
	{Mismatch, "a request with other parameters never runs and always gets 422"},
	{Linearizable, "the history of each key is linearizable against the decision-table model (porcupine)"},
	{Liveness, "no key stays in flight once its owner is gone and LockTTL has passed"},
	{Retention, "no key outlives its retention once pruned (a leak is a finding, a failure in strict mode)"},
	{Availability, "a Begin while its key is certainly in flight, with no fault near, is answered 409, not an error (past a tolerance, a finding)"},
}

// Evidence is everything a scenario recorded, for the checkers.
type Evidence struct {
	Hist        *history.History
	Ledger      *history.Ledger
	Model       models.Config
	ProbeClient int // the client id of the final liveness probes
	// Unprobed are the keys (stores.KeyRef.String) the final probe left
	// out, a claim on them possibly still held under a lease longer than
	// the run could wait (Params.Unprobed): liveness does not judge them,
	// and its result says how many.
	Unprobed   map[string]bool
	LinTimeout time.Duration // porcupine's budget
	// Fence, if set, is the store's declared fencing number of a token
	// (stores.Fence): the fencing checker then also proves that the numbers
	// strictly increase with every claim of a key (within each life of its
	// record, for a store that declares FenceRestartsPerLife). Numbers a
	// store gives as stores.Decision.Fence are checked so without it.
	Fence stores.Fence
	// FencesGiven says that the store gave a fencing number as a field
	// (stores.Decision.Fence) on some claim of the run: one part of a run
	// ([RunParts]) may hold none, and its claims are held to the numbers
	// all the same. Without it, each part's own claims say.
	FencesGiven bool
	// LeakProbe, if set, is the client id of the probes sent once every
	// key was past its retention and pruned, with a fingerprint no order
	// uses: a key that is still there leaked. StrictRetention makes a leak
	// a violation instead of a finding.
	LeakProbe       *int
	StrictRetention bool
	// StrictAvailability makes a store that errs where the decision table
	// says 409, past [AvailabilityTolerance], a violation instead of a
	// finding.
	StrictAvailability bool
	// Keep asks the linearizability checker to keep what a page of
	// porcupine's visualisation needs (Result.Linearization), for a report
	// to draw.
	Keep bool
	// Done, if set, is closed when the run is interrupted: the
	// linearizability search, the one checker that can take long, then
	// stops and answers unknown instead of holding the run for up to
	// LinTimeout (see search).
	Done <-chan struct{}
}

// Part is one part of a run's evidence: the calls, work runs, answers
// and charges of some of its keys (each key in exactly one part), with
// every Prune and every fault of the run. A run too large to hold in
// memory is judged part by part ([RunParts]): every promise a checker
// proves is a promise about one key, and a Prune or a fault, which acts
// on every key, is in every part. Hist and Ledger are both required (an
// empty ledger for a part without charges).
type Part struct {
	Hist   *history.History
	Ledger *history.Ledger
}

// Run runs every checker on the evidence, in the order of [Docs]: it is
// [RunParts] on one part, e.Hist and e.Ledger.
func Run(e Evidence) []Result {
	return RunParts(e, slices.Values([]Part{{Hist: e.Hist, Ledger: e.Ledger}}))
}

// RunParts runs every checker on a run given in parts ([Part]), in the
// order of [Docs], and gives the results [Run] gives on the whole run:
// each part is checked with a copy of e whose Hist and Ledger are the
// part's (e's own are not read, and may be nil) into a small tally of
// what each checker found (counts, violations, the first it names), and
// the tallies, merged, are judged once. So a rate (the availability
// tolerance) or a finding (a leak) is decided on the whole run, never on
// one part, and a checker's first violation is the run's first by key,
// whichever part holds it.
//
// The parts are visited once, in order, one at a time, and a part is
// dropped once tallied (its calls are not kept): the memory a check
// takes is bounded by its largest part, and the violations it finds. The
// linearizability search has one deadline, linCap LinTimeouts from the start of RunParts, shared by
// every part. Its drawing for a page (Evidence.Keep) is the whole
// history's only when the run is one part; a passing run of several is
// too large to draw as one page, and a failing one keeps the failing keys
// of the first part that has any. A part none of whose claims gives a
// fencing number is held to the numbers other parts give when
// e.FencesGiven says so.
func RunParts(e Evidence, parts iter.Seq[Part]) []Result {
	deadline := time.Now().Add(linCap * e.LinTimeout)
	var t tally
	first := true
	for p := range parts {
		pe := e
		pe.Hist, pe.Ledger = p.Hist, p.Ledger
		t.add(checkPart(pe, deadline, first))
		first = false
	}
	return t.decide(e)
}

// tally is what every checker found in one part of a run, or in the
// parts merged so far: small beside the part's calls, which are dropped
// once it is made. Each checker's tally adds another part's (add) and is
// judged once every part is in (decide).
type tally struct {
	atMostOnce   atMostOnceTally
	exclusive    exclusiveTally
	fencing      fencingTally
	replay       countTally
	mismatch     countTally
	lin          linTally
	liveness     livenessTally
	retention    retentionTally
	availability availabilityTally
}

// checkPart runs every checker on one part, e's Hist and Ledger; first
// says it is the run's first part (linTally).
func checkPart(e Evidence, deadline time.Time, first bool) tally {
	ops := e.Hist.Ops()
	g := groupByKey(ops)
	return tally{
		atMostOnce:   checkAtMostOnce(e, g),
		exclusive:    checkExclusive(e, ops),
		fencing:      checkFencing(e, ops, g),
		replay:       checkReplay(e, g),
		mismatch:     checkMismatch(e, g),
		lin:          checkLinearizable(e, ops, g, deadline, first),
		liveness:     checkLiveness(e, ops),
		retention:    checkRetention(e, ops),
		availability: checkAvailability(e, g),
	}
}

// countTally is the tally of a checker that counts what it judged and
// lists its violations (replay-fidelity, mismatch).
type countTally struct {
	n  int
	vs []Violation
}

// add merges o, the next part's tally, into t.
func (t *countTally) add(o countTally) {
	t.n += o.n
	t.vs = append(t.vs, o.vs...)
}

// decide is checker's result of a run's merged tally: its violations, or
// a pass whose detail is passed, a format of the count.
func (t countTally) decide(checker, passed string) Result {
	sortViolations(t.vs)
	return judged(result(checker, t.vs, fmt.Sprintf(passed, t.n)), t.n)
}

// add merges o, the next part's tally, into t.
func (t *tally) add(o tally) {
	t.atMostOnce.add(o.atMostOnce)
	t.exclusive.add(o.exclusive)
	t.fencing.add(o.fencing)
	t.replay.add(o.replay)
	t.mismatch.add(o.mismatch)
	t.lin.add(o.lin)
	t.liveness.add(o.liveness)
	t.retention.add(o.retention)
	t.availability.add(o.availability)
}

// decide judges the merged tally of a run: every checker's result, in
// the order of [Docs].
func (t tally) decide(e Evidence) []Result {
	return []Result{
		t.atMostOnce.decide(),
		t.exclusive.decide(e),
		t.fencing.decide(e),
		t.replay.decide(Replay, "%d replays, all of a saved response; every client got the same answer"),
		t.mismatch.decide(Mismatch, "%d reuses with other parameters, all answered 422; no 422 to a key's own parameters"),
		t.lin.decide(e),
		t.liveness.decide(len(e.Unprobed)),
		t.retention.decide(e),
		t.availability.decide(e),
	}
}

// judged is r, having judged n things.
func judged(r Result, n int) Result {
	r.Judged = n
	return r
}

func result(name string, vs []Violation, okDetail string) Result {
	vs = onePerKey(vs)
	if len(vs) > 0 {
		return Result{Checker: name, Verdict: Fail, Detail: fmt.Sprintf("%d violation(s): %s", len(vs), vs[0].Detail), Violations: vs}
	}
	return Result{Checker: name, Verdict: Pass, Detail: okDetail}
}

// onePerKey keeps the first violation of each key, noting how many more
// the key had, so one broken key does not drown the others.
func onePerKey(vs []Violation) []Violation {
	var out []Violation
	count := map[string]int{}
	for _, v := range vs {
		count[v.Key]++
	}
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.Key] {
			continue
		}
		seen[v.Key] = true
		if n := count[v.Key] - 1; n > 0 {
			v.Detail += fmt.Sprintf(" (and %d more on this key)", n)
		}
		out = append(out, v)
	}
	return out
}

var ms = history.Millis

// grouped is a part's ops by key (Prunes left out), with the keys in
// order of first appearance: made once per part and shared by the
// checkers that go key by key.
type grouped struct {
	keyed map[stores.KeyRef][]history.Op
	order []stores.KeyRef
	// prunes are the history's Prune calls, in call order: a Prune acts
	// on every key (mayBeExpired).
	prunes []history.Op
}

func groupByKey(ops []history.Op) grouped {
	keyed, order := history.ByKey(ops)
	g := grouped{keyed: keyed, order: order}
	for _, op := range ops {
		if op.Input.Kind == models.Prune && !op.Output.NotApplied { // one declared not applied removed nothing
			g.prunes = append(g.prunes, op)
		}
	}
	slices.SortStableFunc(g.prunes, func(a, b history.Op) int { return cmp.Compare(a.Call, b.Call) })
	return g
}

// tok shortens a token for a message.
func tok(t stores.Token) string { return faults.ShortToken(string(t)) }

// firstClaim is the key's first known claim (its creation), if any.
func firstClaim(ops []history.Op) (history.Op, bool) {
	for _, op := range ops {
		if op.IsClaim() {
			return op, true
		}
	}
	return history.Op{}, false
}

// firstPossibleClaim is the key's first Begin (ops are in call order)
// that may have created it: a known claim, or a Begin whose answer was
// lost.
func firstPossibleClaim(ops []history.Op) (history.Op, bool) {
	for _, op := range ops {
		if op.IsClaim() || (op.Input.Kind == models.Begin && op.Output.Unknown) {
			return op, true
		}
	}
	return history.Op{}, false
}

// mayBeExpired reports whether a key's record may be past its retention
// when op was decided, by either clock a store may judge it by: the
// history's (the record was created no earlier than born, the first Begin
// that may have made it, was called, and op was decided no later than it
// returned) or the store's own (storeElapsed: a scheduled episode's
// manual clock moves a LockTTL a tick while the history's barely moves,
// and a caller-clock store rightly lets a key go by the clock it is
// given).
//
// A Prune that may have run between the two may have removed the record
// by its own time (prunedBy): a client that stamped its claim long before
// sending it, on a loaded machine, made a record already old by the
// clock a caller-clock store keeps, and a Prune in between rightly
// removed it, though the later claim's own time was inside the window.
func mayBeExpired(m models.Config, born, op history.Op, prunes []history.Op) bool {
	if time.Duration(op.Return-born.Call) >= m.Retention-m.Slack {
		return true
	}
	if d, ok := storeElapsed(born, op); ok && d >= m.Retention-m.Slack {
		return true
	}
	return prunedBy(m, born, op, prunes)
}

// prunedBy reports whether one of the prunes may have removed the record
// born created before op was decided: it may have run after the record
// was made and before op returned, and by its own time the record was
// past its retention.
func prunedBy(m models.Config, born, op history.Op, prunes []history.Op) bool {
	created, ok := bornAt(born)
	if !ok {
		return false
	}
	for _, p := range prunes {
		if p.Call > op.Return {
			break // in call order: none later can have acted before op
		}
		if p.Return >= born.Call && !p.Input.Now.IsZero() && p.Input.Now.Sub(created) >= m.Retention-m.Slack {
			return true
		}
	}
	return false
}

// storeElapsed is the most time that can have passed on the store's clock
// between the creation of a key's record by born (the first Begin that
// may have made it) and op's decision: the earliest born can have created
// it (bornAt), and op's (a Begin's DecidedAt, else the
// caller's clock after the call, the latest a store decided it by). ok is
// false when either is unknown.
func storeElapsed(born, op history.Op) (time.Duration, bool) {
	created, ok := bornAt(born)
	decided := op.Input.Now
	if op.Input.Kind == models.Begin && op.Output.Decided() {
		decided = op.Output.Decision.DecidedAt
	}
	if !ok || decided.IsZero() {
		return 0, false
	}
	return decided.Sub(created), true
}

// bornAt is the earliest the store can have created a key's record by
// born: a claim's DecidedAt (the store's own reading), or an unanswered
// Begin's, as the model places it (models.UnansweredAt: the store may
// have read its request time coarser than the harness wrote it). ok is false when
// the time is unknown.
func bornAt(born history.Op) (time.Time, bool) {
	if born.IsClaim() {
		at := born.Output.Decision.DecidedAt
		return at, !at.IsZero()
	}
	if born.Input.Now.IsZero() {
		return time.Time{}, false
	}
	return models.UnansweredAt(born.Input.Now), true
}

func sortViolations(vs []Violation) {
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].Key < vs[j].Key })
}

// firstReset is the earliest call of anything that may have emptied the
// key whose ops are kops (the key may have been released or pruned
// before t exactly when firstReset < t; history.Never when nothing may
// have): a release of the key (not
// fenced, not declared not applied) or a prune (not declared not
// applied: g.prunes, whose first is the earliest). Made once per key
// from g, made once per part, it replaces a look through the key's ops
// and the whole part for every call asked about, which made checking
// quadratic: a history of 12,000 keys (60,000 calls) took 21 s in the
// mismatch and replay-fidelity checkers, 119 s under -race.
func (g grouped) firstReset(kops []history.Op) int64 {
	at := history.Never
	if len(g.prunes) > 0 {
		at = g.prunes[0].Call
	}
	for _, op := range kops {
		if op.Input.Kind == models.Release && !op.Output.Fenced && !op.Output.NotApplied {
			at = min(at, op.Call)
		}
	}
	return at
}
