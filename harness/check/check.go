// Package check judges a recorded history: checkers (listed in [Docs]),
// each with a three-valued verdict (pass, fail, unknown), that prove or
// refute per key that the work ran at most once, that fencing rejected
// every stale writer, that replays were faithful, that other parameters
// got 422, that the history is linearizable against the decision-table
// model, that no key stayed stuck, and that none outlived its retention.
// Checkers read the history and the ledger only; they never import what
// produced them.
package check

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

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
}

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
)

// Preference orders the checkers by how directly they name a bug:
// linearizability catches nearly every mutant but says least. A hunt and a
// demo name a mutant's killer by it.
var Preference = []string{AtMostOnce, Exclusive, Fencing, Mismatch, Liveness, Retention, Replay, Linearizable}

// Docs says what each checker proves, in the order Check runs them, for
// `idemcheck list` and reports.
var Docs = []struct{ Name, Doc string }{
	{AtMostOnce, "each order is charged at most once at the provider, and no key is claimed again after it was saved done (inside its retention)"},
	{Exclusive, "a key's work never overlaps with the work of a healthy (not paused, not crashed) owner"},
	{Fencing, "no write is accepted from a token that was superseded, and no token repeats for a key"},
	{Replay, "every replay equals a response that was saved, and every client got the same answer for a key"},
	{Mismatch, "a request with other parameters never runs and always gets 422"},
	{Linearizable, "the history of each key is linearizable against the decision-table model (porcupine)"},
	{Liveness, "no key stays in flight once its owner is gone and LockTTL has passed"},
	{Retention, "no key outlives its retention once pruned (a leak is a finding, a failure in strict mode)"},
}

// Evidence is everything a scenario recorded, for the checkers.
type Evidence struct {
	Hist        *history.History
	Ledger      *history.Ledger
	Model       models.Config
	ProbeClient int           // the client id of the final liveness probes
	LinTimeout  time.Duration // porcupine's budget
	// Fence, if set, is the store's declared fencing number of a token
	// (stores.Fence): the fencing checker then also proves that the numbers
	// strictly increase with every claim of a key.
	Fence stores.Fence
	// LeakProbe, if set, is the client id of the probes sent once every
	// key was past its retention and pruned, with a fingerprint no order
	// uses: a key that is still there leaked. StrictRetention makes a leak
	// a violation instead of a finding.
	LeakProbe       *int
	StrictRetention bool
	// Visualization, if set, receives porcupine's HTML of the history.
	Visualization *bytes.Buffer
}

// Run runs every checker, in the order of [Docs].
func Run(e Evidence) []Result {
	ops := e.Hist.Ops()
	g := groupByKey(ops)
	return []Result{
		checkAtMostOnce(e, ops, g),
		checkExclusive(e, ops),
		checkFencing(e, ops, g),
		checkReplay(e, ops, g),
		checkMismatch(e, ops, g),
		checkLinearizable(e, ops, g),
		checkLiveness(e, ops),
		checkRetention(e, ops),
	}
}

// checkRetention reads the leak probes: each key was past its retention,
// and pruned, when the probe asked for it with a fingerprint nobody used;
// the answer must be a fresh claim (the key is gone). Any other answer
// means the store kept the key past its retention: a leak, which grows the
// store forever and keeps a reused key from ever being new. The contract
// allows a store to keep a key longer (retention is a minimum), so a leak
// is a finding (the verdict passes, the detail counts it) unless
// StrictRetention asks for it to fail.
func checkRetention(e Evidence, ops []history.Op) Result {
	if e.LeakProbe == nil {
		return Result{Checker: Retention, Verdict: Pass, Detail: "no leak probe in this scenario"}
	}
	var vs []Violation
	probes := 0
	for _, op := range ops {
		if op.Client != *e.LeakProbe || op.Input.Kind != models.Begin || op.Output.Unknown {
			continue
		}
		probes++
		if d := op.Output.Decision; d.Outcome != stores.Claimed || d.Takeover {
			what := d.Outcome.String()
			if d.Takeover {
				what = "a takeover of a claim still there"
			}
			vs = append(vs, Violation{Retention, op.Input.Key.String(), fmt.Sprintf(
				"%s was still there past its retention (%v) and a prune: a new request got %s", op.Input.Key, e.Model.Retention, what)})
		}
	}
	sortViolations(vs)
	if len(vs) > 0 && !e.StrictRetention {
		return Result{Checker: Retention, Verdict: Pass, Detail: fmt.Sprintf(
			"finding: %d of %d keys kept past their retention (a leak; strict retention makes it a failure); first: %s", len(vs), probes, vs[0].Detail)}
	}
	return result(Retention, vs, fmt.Sprintf("%d keys probed past their retention, all gone", probes))
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

// grouped is the history's ops by key (Prunes left out), with the keys in
// order of first appearance: made once per Run and shared by the
// checkers that go key by key.
type grouped struct {
	keyed map[stores.KeyRef][]history.Op
	order []stores.KeyRef
}

func groupByKey(ops []history.Op) grouped {
	keyed, order := history.ByKey(ops)
	return grouped{keyed, order}
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
// when a call that returned at t was decided: the record was created no
// earlier than born (the first Begin that may have made it) was called,
// and the call was decided no later than t.
func mayBeExpired(m models.Config, born history.Op, t int64) bool {
	return time.Duration(t-born.Call) >= m.Retention-m.Slack
}

func checkAtMostOnce(e Evidence, ops []history.Op, g grouped) Result {
	var vs []Violation
	charges := e.Ledger.Charges()
	for order, n := range e.Ledger.EffectiveByOrder() {
		if n > 1 {
			var ids []string
			for _, c := range charges {
				if c.Order == order && c.Effective {
					ids = append(ids, fmt.Sprintf("%s by client %d at %s", c.ID, c.Client, ms(c.At)))
				}
			}
			vs = append(vs, Violation{AtMostOnce, order, fmt.Sprintf("order %s charged %d times: %s", order, n, strings.Join(ids, ", "))})
		}
	}
	// A key that was saved done must never be claimed again while it is
	// retained: that claim would run the work a second time. Only a claim
	// certainly inside the window counts: the store decided it at some
	// moment of its call and created the key at some moment of the first
	// claim's, so at most op.Return - created.Call passed between them (a
	// Begin that waited on a loaded machine may have been decided past
	// retention, on the server's clock, however early it was sent).
	//
	// The window starts with the first Begin that may have created the
	// key: a known claim, or an earlier Begin whose answer was lost (it may
	// have claimed on the server, and a store that keeps a key Retention
	// from its first request lets it go that much sooner: a Redis chaos
	// soak had a lost claim 10 s before the known takeover).
	keyed, order := g.keyed, g.order
	for _, k := range order {
		kops := keyed[k]
		created, ok := firstPossibleClaim(kops)
		if !ok {
			continue
		}
		var done *history.Op
		for i, op := range kops {
			if done == nil && op.Accepted(models.Complete) {
				done = &kops[i]
				continue
			}
			if done != nil && op.IsClaim() && op.Call > done.Return &&
				time.Duration(op.Return-created.Call) < e.Model.Retention-e.Model.Slack-time.Duration(done.Return-done.Call) {
				vs = append(vs, Violation{AtMostOnce, k.String(), fmt.Sprintf(
					"%s was claimed again by client %d at %s (token %s), after client %d saved it done at %s and inside the retention window: the work runs twice",
					k, op.Client, ms(op.Return), tok(op.Output.Decision.Token), done.Client, ms(done.Return))})
				break
			}
		}
	}
	sortViolations(vs)
	return result(AtMostOnce, vs, fmt.Sprintf("%d orders charged, none twice; no work re-ran after done", len(e.Ledger.EffectiveByOrder())))
}

func sortViolations(vs []Violation) {
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].Key < vs[j].Key })
}

// clientKey names a client's hold on a key: checkExclusive excuses a run
// whose client was paused or crashed on that key after its claim, at a
// "run." failpoint (so a takeover of it was legitimate).
type clientKey struct {
	client int
	key    stores.KeyRef
}

// stalled is how long the harness's own process stood still (FaultStall)
// between from and to: every owner in it was paused that long.
func stalled(stalls []history.Fault, from, to int64) time.Duration {
	var d int64
	for _, f := range stalls {
		if lo, hi := max(f.Start, from), min(f.End, to); hi > lo {
			d += hi - lo
		}
	}
	return time.Duration(d)
}

// checkExclusive compares the work runs of each key pairwise. A run b
// that starts while an earlier run a (another token) is still going is a
// violation unless the owner whose claim came first (a's, or b's when b's
// claim came back before a's was sent and b ran its work late) was unhealthy: paused or crashed
// by the harness at a failpoint on the key, or short of half the LockTTL
// between its claim and b's start, spent waiting for its claim's answer
// or with the harness's own process standing still (FaultStall). The
// owner taken over is the one that may be stale; the owner that took the
// key over holds the live claim. Half the LockTTL is the tolerance: an
// owner that lost that much of its lease to the machine, not to its work,
// can have been taken over legitimately, and fencing judges its writes;
// an owner whose own work outlasts the LockTTL (the lock-shorter-than-work
// mutant) is not excused.
func checkExclusive(e Evidence, ops []history.Op) Result {
	var vs []Violation
	fs := e.Hist.Faults()
	var stalls []history.Fault
	for _, f := range fs {
		if f.Kind == history.FaultStall {
			stalls = append(stalls, f)
		}
	}
	claimedAt := map[stores.KeyRef]map[stores.Token]history.Op{} // token -> its claim
	for _, op := range ops {
		if op.IsClaim() {
			if claimedAt[op.Input.Key] == nil {
				claimedAt[op.Input.Key] = map[stores.Token]history.Op{}
			}
			claimedAt[op.Input.Key][op.Output.Decision.Token] = op
		}
	}
	byKeyRuns := map[stores.KeyRef][]history.WorkRun{}
	var keys []stores.KeyRef
	runs := 0
	for _, w := range e.Hist.Work() {
		if _, ok := byKeyRuns[w.Key]; !ok {
			keys = append(keys, w.Key)
		}
		byKeyRuns[w.Key] = append(byKeyRuns[w.Key], w)
		runs++
	}
	// Who was unhealthy on which key, looked up once per pair instead of
	// scanning every fault for every pair.
	sick := map[clientKey]bool{}
	for _, f := range fs {
		if strings.HasPrefix(f.Failpoint, "run.") {
			sick[clientKey{f.Client, f.Key}] = true
		}
	}
	// unhealthy: r's owner was paused or crashed at a failpoint on the
	// key, or its lease ran while it waited for the answer to its claim (a
	// claim that took long to come back, on a loaded machine: a queue for
	// the write lock) and while the harness's process stood still, until
	// at: half a LockTTL lost that way, and it is not a healthy owner.
	unhealthy := func(r history.WorkRun, at int64) bool {
		if sick[clientKey{r.Client, r.Key}] {
			return true
		}
		lost := time.Duration(0)
		from := r.Start
		if c, ok := claimedAt[r.Key][r.Token]; ok {
			lost, from = time.Duration(c.Return-c.Call), c.Return
		}
		return 2*(lost+stalled(stalls, from, at)) >= e.Model.LockTTL
	}
	excused := 0
	for _, k := range keys {
		work := byKeyRuns[k] // in order of start (History.Work)
		for i, a := range work {
			// Every later run that overlapped a's while a was healthy: one
			// violation names them all, as the timeline shows them.
			var with []history.WorkRun
			for _, b := range work[i+1:] {
				if b.Start >= a.End {
					break // every later run starts later still: none overlaps a
				}
				if b.Token == a.Token {
					continue
				}
				// The owner that may have been taken over is the one whose
				// claim came first: a's, unless b's claim came back before
				// a's was sent (b claimed, stood still past its lease, a
				// took the key over, and b ran its work late: b was the
				// stale one). Claims that overlap in time are judged by a,
				// as two claims granted at once are the race this checker
				// is for.
				ca, okA := claimedAt[k][a.Token]
				cb, okB := claimedAt[k][b.Token]
				older := a
				if okA && okB && cb.Return < ca.Call {
					older = b
				}
				if unhealthy(older, b.Start) {
					excused++
					continue
				}
				with = append(with, b)
			}
			if len(with) == 0 {
				continue
			}
			clients := []string{fmt.Sprint(a.Client)}
			runs := []string{fmt.Sprintf("client %d (token %s) from %s to %s", a.Client, tok(a.Token), ms(a.Start), ms(a.End))}
			for _, b := range with {
				clients = append(clients, fmt.Sprint(b.Client))
				runs = append(runs, fmt.Sprintf("client %d (token %s) from %s", b.Client, tok(b.Token), ms(b.Start)))
			}
			vs = append(vs, Violation{Exclusive, a.Key.String(), fmt.Sprintf(
				"clients %s ran the work of %s at once: %s; client %d was healthy",
				andList(clients), a.Key, strings.Join(runs, ", "), a.Client)})
		}
	}
	sortViolations(vs)
	detail := fmt.Sprintf("%d work runs, none overlapping a healthy owner", runs)
	if excused > 0 {
		detail += fmt.Sprintf(" (%d overlaps excused: the owner whose claim came first was paused or crashed by the harness, or lost half a LockTTL or more waiting for its claim's answer or to the harness's own stalls)", excused)
	}
	return result(Exclusive, vs, detail)
}

func checkFencing(e Evidence, ops []history.Op, g grouped) Result {
	var vs []Violation
	keyed, order := g.keyed, g.order
	writes, fenced := 0, 0
	for _, k := range order {
		kops := keyed[k]
		var claims []history.Op
		seen := map[stores.Token]history.Op{}
		for _, op := range kops {
			if !op.IsClaim() {
				continue
			}
			tok := op.Output.Decision.Token
			if prev, dup := seen[tok]; dup {
				vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
					"token %s handed out twice for %s: to client %d at %s and to client %d at %s",
					tok, k, prev.Client, ms(prev.Return), op.Client, ms(op.Return))})
			}
			seen[tok] = op
			claims = append(claims, op)
		}
		if e.Fence != nil {
			fenced += len(claims)
			vs = append(vs, monotonicFences(e.Fence, k, claims)...)
		}
		for _, w := range kops {
			if !w.Accepted(models.Complete) && !w.Accepted(models.Release) {
				continue
			}
			// A quiet release answers ok whether or not it was the
			// owner's; whether it deleted another's claim shows in what
			// the key answers next (linearizability).
			if w.Input.Kind == models.Release && e.Model.Semantics.QuietRelease {
				continue
			}
			writes++
			// the write's own claim: the latest claim with its token before it
			var own *history.Op
			for i := range claims {
				if claims[i].Output.Decision.Token == w.Input.Token && claims[i].Return <= w.Call {
					own = &claims[i]
				}
			}
			if own == nil {
				continue
			}
			for _, c := range claims {
				if c.Output.Decision.Token != w.Input.Token && c.Call > own.Return && c.Return < w.Call {
					vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
						"%s by client %d with token %s was accepted at %s, but client %d had taken %s over with token %s at %s",
						w.Input.Kind, w.Client, tok(w.Input.Token), ms(w.Return), c.Client, k, tok(c.Output.Decision.Token), ms(c.Return))})
					break
				}
			}
		}
	}
	sortViolations(vs)
	detail := fmt.Sprintf("%d accepted writes, all from the current token; no token repeated", writes)
	if e.Fence != nil {
		detail += fmt.Sprintf("; the fencing numbers of %d claims increase", fenced)
	}
	return result(Fencing, vs, detail)
}

func checkReplay(e Evidence, ops []history.Op, g grouped) Result {
	var vs []Violation
	keyed, order := g.keyed, g.order
	replays := 0
	for _, k := range order {
		kops := keyed[k]
		for _, r := range kops {
			if r.Input.Kind != models.Begin || r.Output.Unknown || r.Output.Decision.Outcome != stores.Replay {
				continue
			}
			replays++
			found := false
			for _, c := range kops {
				if c.Input.Kind == models.Complete && !c.Output.Fenced && c.Call < r.Return && c.Input.Response == r.Output.Decision.Response {
					found = true
					break
				}
			}
			if !found {
				vs = append(vs, Violation{Replay, k.String(), fmt.Sprintf(
					"client %d was replayed %d %q for %s at %s, which no Complete had saved",
					r.Client, r.Output.Decision.Response.Status, r.Output.Decision.Response.Body, k, ms(r.Return))})
			}
		}
	}
	// Every client that got an answer for a key with the same parameters
	// got the same answer, within one life of the key: once a key saved
	// done has been claimed again (its record expired, was pruned or
	// released), the new owner's answer is a new one. Whether that claim
	// was allowed is at-most-once's and linearizability's to judge (inside
	// the retention it is a violation there), so it is not reported twice.
	// A key is known done from the first accepted save, or the first
	// replay (a save whose answer was lost may still have landed). A claim
	// sent after that starts a new life. So does a claim that may be
	// ordered after it (it returned after the save or replay was called)
	// when something may have emptied the key before it returned: a
	// release or prune called by then, or the retention running out. A
	// Begin that waited 20 s on a loaded Postgres was sent before the save
	// and decided, past a prune, long after it (a soak found it on
	// takeover and sched-retention); a claim racing the save with nothing
	// to empty the key between them is the same life, and two answers in
	// it are a violation here too.
	reclaimed := map[stores.KeyRef]int64{} // the first such claim, by its call
	for _, k := range order {
		kops := keyed[k]
		doneCall, doneAt := int64(-1), int64(-1)
		for _, op := range kops {
			replayed := op.Input.Kind == models.Begin && !op.Output.Unknown && op.Output.Decision.Outcome == stores.Replay
			if !op.Accepted(models.Complete) && !replayed {
				continue
			}
			if doneCall < 0 || op.Call < doneCall {
				doneCall = op.Call
			}
			if doneAt < 0 || op.Return < doneAt {
				doneAt = op.Return
			}
		}
		if doneCall < 0 {
			continue
		}
		born, _ := firstPossibleClaim(kops)
		for _, op := range kops {
			if !op.IsClaim() || op.Return <= doneCall {
				continue
			}
			if op.Call > doneAt || resetBefore(ops, kops, op.Return) || mayBeExpired(e.Model, born, op.Return) {
				reclaimed[k] = op.Call
				break
			}
		}
	}
	first := map[string]history.Answer{}
	for _, a := range e.Hist.Answers() {
		if a.Err != "" || a.Client == e.ProbeClient {
			continue
		}
		id := a.Key.String() + "\x00" + a.Fingerprint
		f, ok := first[id]
		if !ok {
			first[id] = a
			continue
		}
		if at, ok := reclaimed[a.Key]; ok && at < a.At && f.Response != a.Response {
			continue // a later life of the key answered
		}
		if f.Response != a.Response {
			vs = append(vs, Violation{Replay, a.Key.String(), fmt.Sprintf(
				"clients %d and %d got different answers for %s: %d %q and %d %q",
				f.Client, a.Client, a.Key, f.Response.Status, f.Response.Body, a.Response.Status, a.Response.Body)})
		}
	}
	sortViolations(vs)
	return result(Replay, vs, fmt.Sprintf("%d replays, all of a saved response; every client got the same answer", replays))
}

func checkMismatch(e Evidence, ops []history.Op, g grouped) Result {
	var vs []Violation
	flagged := map[int]bool{} // Begins already reported, by input id
	keyed, order := g.keyed, g.order
	checked := 0
	for _, k := range order {
		kops := keyed[k]
		created, ok := firstClaim(kops)
		if !ok {
			continue
		}
		fp := created.Input.Fingerprint
		born, _ := firstPossibleClaim(kops)
		for _, op := range kops {
			if op.Input.Kind != models.Begin || op.Input.Fingerprint == fp || op.Output.Unknown || op.Call < created.Return {
				continue
			}
			// A release or prune that began before this Begin returned may
			// be ordered before it (they overlap, or it came first): the
			// key may have started a new life, with a new fingerprint.
			if resetBefore(ops, kops, op.Return) {
				continue
			}
			// So may a key whose retention may have run out by the time the
			// store decided this Begin: a store that expires keys itself
			// (Redis) needs no prune. Only a Begin certainly inside the
			// retention is judged (mayBeExpired): a Redis key-space soak
			// had a Begin wait 9 s on a loaded machine and be decided 11 s
			// after the claim, past a 10 s retention.
			if mayBeExpired(e.Model, born, op.Return) {
				continue
			}
			checked++
			if o := op.Output.Decision.Outcome; o != stores.Mismatch {
				flagged[op.Input.ID] = true
				vs = append(vs, Violation{Mismatch, k.String(), fmt.Sprintf(
					"client %d reused %s with other parameters (fingerprint %s, first %s) and got %s instead of 422",
					op.Client, k, op.Input.Fingerprint, fp, o)})
			}
		}
		// A takeover says a claim was there. If every claim that may have
		// made it (claimed, or no answer) before the takeover returned had
		// other parameters, the store took over a claim of other
		// parameters: the takeover compared no fingerprint. This holds
		// even while the first claim's call is still open, where the
		// reuse above cannot be judged.
		for _, op := range kops {
			if !op.IsClaim() || !op.Output.Decision.Takeover || flagged[op.Input.ID] {
				continue
			}
			same, other := false, ""
			for _, c := range kops {
				if c.Input.ID == op.Input.ID || c.Input.Kind != models.Begin || c.Call >= op.Return || !(c.IsClaim() || c.Output.Unknown) {
					continue
				}
				if c.Input.Fingerprint == op.Input.Fingerprint {
					same = true
					break
				}
				other = c.Input.Fingerprint
			}
			if !same && other != "" {
				checked++
				vs = append(vs, Violation{Mismatch, k.String(), fmt.Sprintf(
					"client %d took %s over with fingerprint %s, but every claim it could have taken over had other parameters (%s): the takeover compared no fingerprint",
					op.Client, k, op.Input.Fingerprint, other)})
			}
		}
	}
	// A 422 is right only if the key may hold other parameters: some Begin
	// with another fingerprint claimed it (or may have: no answer) before
	// the 422 came back. Otherwise the store refused a request whose
	// parameters are the key's own: a spurious 422, as a store that merges
	// two keys (case, tenant, encoding) gives.
	spurious := 0
	for _, k := range order {
		kops := keyed[k]
		for _, op := range kops {
			if op.Input.Kind != models.Begin || op.Output.Unknown || op.Output.Decision.Outcome != stores.Mismatch {
				continue
			}
			other := false
			for _, c := range kops {
				if c.Input.Kind == models.Begin && c.Input.Fingerprint != op.Input.Fingerprint && c.Call < op.Return &&
					(c.IsClaim() || c.Output.Unknown) {
					other = true
					break
				}
			}
			if !other {
				spurious++
				vs = append(vs, Violation{Mismatch, k.String(), fmt.Sprintf(
					"client %d was answered 422 for %s (fingerprint %s), though no request with other parameters had claimed the key: a spurious mismatch (is the key merged with another?)",
					op.Client, k, op.Input.Fingerprint)})
			}
		}
	}
	sortViolations(vs)
	return result(Mismatch, vs, fmt.Sprintf("%d reuses with other parameters, all answered 422; no 422 to a key's own parameters", checked))
}

// resetBefore reports whether the key may have been released or pruned
// before t: a release (not fenced) or prune called before t.
func resetBefore(all, kops []history.Op, t int64) bool {
	for _, op := range kops {
		if op.Input.Kind == models.Release && !op.Output.Fenced && op.Call < t {
			return true
		}
	}
	for _, op := range all {
		if op.Input.Kind == models.Prune && op.Call < t {
			return true
		}
	}
	return false
}

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
// Copying every Prune into every key made a history of P prunes and K keys
// P×K operations larger. A key none of whose calls got an answer is left
// out whole (keySpan.answered). It also returns how many keys the history
// has.
func porcupineOps(m models.Config, ops []history.Op) ([]porcupine.Operation, int) {
	spans := map[stores.KeyRef]*keySpan{}
	var keys []stores.KeyRef
	for _, op := range ops {
		if op.Input.Kind == models.Prune {
			continue
		}
		sp, ok := spans[op.Input.Key]
		if !ok {
			sp = &keySpan{first: op.Call, last: op.Return}
			spans[op.Input.Key] = sp
			keys = append(keys, op.Input.Key)
		}
		sp.add(op)
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Input.Kind == models.Prune {
			for _, k := range keys {
				if spans[k].answered && spans[k].prunable(m, op) {
					out = append(out, prunePorcupineOp(op, k))
				}
			}
			continue
		}
		if spans[op.Input.Key].answered {
			out = append(out, porcupineOp(op))
		}
	}
	return out, len(keys)
}

// keyPorcupineOps is one key's part of porcupineOps: its operations (kops,
// none a Prune) and a copy of each of prunes that can act on it.
func keyPorcupineOps(m models.Config, kops, prunes []history.Op) []porcupine.Operation {
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
	out := make([]porcupine.Operation, 0, len(kops))
	for _, op := range kops {
		out = append(out, porcupineOp(op))
	}
	for _, p := range prunes {
		if sp.prunable(m, p) {
			out = append(out, prunePorcupineOp(p, kops[0].Input.Key))
		}
	}
	return out
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
	sp.answered = sp.answered || !op.Output.Unknown
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

func checkLinearizable(e Evidence, ops []history.Op, g grouped) Result {
	model := models.Porcupine(e.Model)
	if len(ops) > VisualizeCap {
		return checkLinearizableByKey(e, model, ops, g)
	}
	pops, keys := porcupineOps(e.Model, ops)
	var (
		res  porcupine.CheckResult
		info porcupine.LinearizationInfo
	)
	if e.Visualization != nil && len(pops) <= VisualizeCap {
		res, info = porcupine.CheckOperationsVerbose(model, pops, e.LinTimeout)
		if res != porcupine.Illegal {
			visualize(e.Visualization, model, info, pops)
		}
	} else {
		// Nothing to draw: porcupine keeps no linearization for a page.
		res = porcupine.CheckOperationsTimeout(model, pops, e.LinTimeout)
		if e.Visualization != nil && res != porcupine.Illegal {
			visualize(e.Visualization, model, info, pops)
		}
	}
	switch res {
	case porcupine.Ok:
		return Result{Checker: Linearizable, Verdict: Pass, Detail: fmt.Sprintf("%d operations on %d keys linearizable", len(ops), keys)}
	case porcupine.Unknown:
		return Result{Checker: Linearizable, Verdict: Unknown, Detail: fmt.Sprintf("porcupine timed out after %v", e.LinTimeout)}
	}
	return linViolations(e, model, models.PartitionByKey(pops), len(pops))
}

// checkLinearizableByKey checks a history too large to draw one key at a
// time: each key's porcupine operations are made, checked and dropped, a
// few keys at once (one per CPU), within one LinTimeout for the whole. A
// million calls then never exist as porcupine operations all at once
// (they were about half the peak memory of checking). porcupine checks a
// partitioned model key by key anyway, so the verdict is the same: the
// history is linearizable when every key's is, and one key that is not
// fails it (even when another key timed out).
func checkLinearizableByKey(e Evidence, model porcupine.Model, ops []history.Op, g grouped) Result {
	var prunes []history.Op
	for _, op := range ops {
		if op.Input.Kind == models.Prune {
			prunes = append(prunes, op)
		}
	}
	deadline := time.Now().Add(e.LinTimeout)
	failing := make([][]porcupine.Operation, len(g.order))
	var timedOut atomic.Bool
	var next atomic.Int64
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
				left := time.Until(deadline)
				if left <= 0 { // porcupine reads a zero timeout as none
					timedOut.Store(true)
					return
				}
				part := keyPorcupineOps(e.Model, g.keyed[g.order[i]], prunes)
				switch porcupine.CheckOperationsTimeout(model, part, left) {
				case porcupine.Illegal:
					failing[i] = part
				case porcupine.Unknown:
					timedOut.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	var parts [][]porcupine.Operation
	n := 0
	for _, p := range failing {
		if p != nil {
			parts = append(parts, p)
			n += len(p)
		}
	}
	switch {
	case len(parts) > 0:
		return linViolations(e, model, parts, n)
	case timedOut.Load():
		return Result{Checker: Linearizable, Verdict: Unknown, Detail: fmt.Sprintf("porcupine timed out after %v", e.LinTimeout)}
	}
	if e.Visualization != nil {
		tooLargeToDraw(e.Visualization, len(ops))
	}
	return Result{Checker: Linearizable, Verdict: Pass, Detail: fmt.Sprintf("%d operations on %d keys linearizable", len(ops), len(g.order))}
}

// linViolations names the keys of parts (the partitions to look at, of n
// operations in all) whose histories are not linearizable, and in each the
// first call that no order allows, and draws the failing keys.
func linViolations(e Evidence, model porcupine.Model, parts [][]porcupine.Operation, n int) Result {
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
			"the history of %s (%d calls) has no order the decision table allows: %s", k, len(part), explain(e.Model, part, info))})
	}
	if len(vs) == 0 {
		vs = append(vs, Violation{Linearizable, "", "the history is not linearizable"})
	}
	if e.Visualization != nil {
		// The failing keys only, whatever their size: they are the
		// evidence. Without a failing key (a timeout in the per-key
		// checks), the whole history is too large to draw: say so.
		if len(failing) > 0 {
			_, info := porcupine.CheckOperationsVerbose(model, failing, e.LinTimeout)
			info.AddAnnotations(keyLabels(failing))
			_ = porcupine.Visualize(model, info, e.Visualization)
		} else if n <= VisualizeCap {
			all := make([]porcupine.Operation, 0, n)
			for _, p := range parts {
				all = append(all, p...)
			}
			_, info := porcupine.CheckOperationsVerbose(model, all, e.LinTimeout)
			visualize(e.Visualization, model, info, all)
		} else {
			tooLargeToDraw(e.Visualization, n)
		}
	}
	return result(Linearizable, vs, "")
}

// VisualizeCap is the largest history, in porcupine operations, drawn in
// full by porcupine's visualisation when the checker finds nothing wrong:
// the page grows about 300 bytes per operation and drawing it took more
// time than checking (58% at 190k operations, a 59 MB page). A failing
// check always draws its failing keys.
const VisualizeCap = 20000

// visualize writes porcupine's page of info (the check of pops) to w,
// with a labelled row per key, or, past VisualizeCap operations, a short
// page that says why there is none.
func visualize(w *bytes.Buffer, model porcupine.Model, info porcupine.LinearizationInfo, pops []porcupine.Operation) {
	if len(pops) <= VisualizeCap {
		info.AddAnnotations(keyLabels(pops))
		_ = porcupine.Visualize(model, info, w)
		return
	}
	tooLargeToDraw(w, len(pops))
}

// tooLargeToDraw writes the short page that stands for the visualisation
// of a passing history of n operations, more than VisualizeCap.
func tooLargeToDraw(w *bytes.Buffer, n int) {
	fmt.Fprintf(w, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>linearizability</title></head><body>
<p>The history has %d operations, more than the %d drawn in full, and every key's history is linearizable:
porcupine's visualisation is left out to keep checking linear (it would take longer than the check and
weigh about %d MB). A failing check draws its failing keys whatever their size. Run a shorter scenario
(fewer keys or seconds) to see the whole history drawn.</p></body></html>
`, n, VisualizeCap, n*300/1_000_000)
}

// checkLiveness judges each key by its last final probe: the probe asks
// again (after LockTTL) when an answer is lost, so only a key whose every
// probe went unanswered, or whose probe found it still in flight, fails.
func checkLiveness(e Evidence, ops []history.Op) Result {
	var vs []Violation
	last := map[stores.KeyRef]history.Op{}
	tries := map[stores.KeyRef]int{}
	var keys []stores.KeyRef
	for _, op := range ops {
		if op.Client != e.ProbeClient || op.Input.Kind != models.Begin {
			continue
		}
		k := op.Input.Key
		if _, ok := last[k]; !ok {
			keys = append(keys, k)
		}
		last[k] = op // ops are in call order
		tries[k]++
	}
	probes := len(keys)
	for _, k := range keys {
		op := last[k]
		switch {
		case op.Output.Unknown:
			vs = append(vs, Violation{Liveness, op.Input.Key.String(), fmt.Sprintf(
				"the final probe of %s got no answer in %d tries (last: %s)", op.Input.Key, tries[k], op.Err)})
		case op.Output.Decision.Outcome == stores.InFlight:
			vs = append(vs, Violation{Liveness, op.Input.Key.String(), fmt.Sprintf(
				"%s is still in flight at the final probe, though every client stopped and LockTTL (%v) has passed: stuck",
				op.Input.Key, e.Model.LockTTL)})
		}
	}
	if probes == 0 {
		return Result{Checker: Liveness, Verdict: Unknown, Detail: "no final probe ran"}
	}
	sortViolations(vs)
	return result(Liveness, vs, fmt.Sprintf("%d keys probed after LockTTL, none stuck", probes))
}

// explain says why a key's history is not linearizable: porcupine's
// longest partial linearization is the longest order of calls the model
// accepts; the first call (by call time) left out of it is one that no
// order allows there, and the model's possible states after the partial
// order say what the store was expected to be.
func explain(cfg models.Config, part []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var longest []porcupine.Operation
	for _, partition := range info.PartialLinearizationsOperations() {
		for _, lin := range partition {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	in := map[int]bool{}
	for _, op := range longest {
		in[op.Input.(models.Input).ID] = true
	}
	var culprit *porcupine.Operation
	for i := range part {
		if !in[part[i].Input.(models.Input).ID] && (culprit == nil || part[i].Call < culprit.Call) {
			culprit = &part[i]
		}
	}
	if culprit == nil {
		return "porcupine found no partial order to explain it"
	}
	states := []models.State{{}}
	for _, op := range longest {
		var next []models.State
		for _, st := range states {
			for _, n := range models.Step(cfg, st, op.Input.(models.Input), op.Output.(models.Output)) {
				if !slices.Contains(next, n) {
					next = append(next, n)
				}
			}
		}
		states = next
	}
	var could []string
	hint := ""
	for _, st := range states {
		if d := models.DescribeState(st); !slices.Contains(could, d) {
			could = append(could, d)
		}
		if h := models.Hint(cfg, st, culprit.Input.(models.Input), culprit.Output.(models.Output)); h != "" {
			hint = " (" + h + ")"
		}
	}
	return fmt.Sprintf("no order allows client %d's %s (called at %s); the longest order the model accepts has %d of the calls, after which the key could be: %s%s",
		culprit.ClientId, models.DescribeOperation(culprit.Input.(models.Input), culprit.Output.(models.Output)), ms(culprit.Call),
		len(longest), strings.Join(could, " | "), hint)
}

// monotonicFences checks a key's claims against the store's declared fence:
// every token carries a number, and a claim that began after another had
// answered carries a greater one (claims whose calls overlap may have
// been decided in either order, so they are not compared).
func monotonicFences(fence stores.Fence, k stores.KeyRef, claims []history.Op) []Violation {
	var vs []Violation
	nums := make([]uint64, len(claims))
	for i, c := range claims {
		n, ok := fence(c.Output.Decision.Token)
		if !ok {
			vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
				"client %d's token %s for %s carries no fencing number", c.Client, tok(c.Output.Decision.Token), k)})
			return vs
		}
		nums[i] = n
	}
	for i, a := range claims {
		for j, b := range claims {
			if a.Return < b.Call && nums[j] <= nums[i] {
				vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
					"fencing numbers of %s do not increase: client %d claimed with %d (token %s) at %s, then client %d with %d (token %s) at %s",
					k, a.Client, nums[i], tok(a.Output.Decision.Token), ms(a.Return), b.Client, nums[j], tok(b.Output.Decision.Token), ms(b.Return))})
				return vs
			}
		}
	}
	return vs
}

// andList joins words as prose: "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// keyLabels labels porcupine's picture with the keys: one annotation row
// per key ("key t0/order-o003"), spanning the key's first call to its last
// answer, since the picture itself only numbers its partitions.
func keyLabels(pops []porcupine.Operation) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, part := range models.PartitionByKey(pops) {
		k := part[0].Input.(models.Input).Key
		start, end := part[0].Call, part[0].Call
		for _, op := range part {
			start = min(start, op.Call)
			if op.Return != history.Never {
				end = max(end, op.Return)
			}
			end = max(end, op.Call)
		}
		out = append(out, porcupine.Annotation{Tag: "key " + k.String(), Start: start, End: end,
			Description: k.String(), Details: fmt.Sprintf("%d operations on key %s", len(part), k)})
	}
	return out
}
