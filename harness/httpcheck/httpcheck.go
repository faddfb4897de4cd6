// Package httpcheck judges a black-box run (idemcheck http): the HTTP
// exchanges the clients recorded plus the charges the payment provider
// counted in its ledger. Each checker says whether it applied (whether the
// run held the evidence it judges) and, when it failed, what kind of bug
// the evidence points to. The ledger is the witness: excuses and causes
// come from the charges (when each began and ended, which instance asked,
// whether the provider failed it) and the exchanges, never from text the
// service chose to put in its answers.
//
//   - answers: most keys got a success, and the provider charged orders
//     idemcheck sent; a service that answers 500 (or 400, or nothing) to
//     most keyed requests, or never calls the provider with the order,
//     tested nothing, and says so before any other verdict.
//   - at-most-once: each order was charged at most once. A second charge
//     is classed by what happened between the two: it came while the
//     provider was still making the first or while the request that made
//     it was still open (a lock that is not shared), after the provider
//     failed the first (a claim released although the charge went
//     through), or after the first had finished (a record lost or not
//     shared). A second charge after idemcheck killed the instance that
//     made the first, when no client got a success for the order between
//     the two, is excused: an owner killed between the effect and saving
//     it cannot be told from one killed before the effect. An instance
//     that exits by itself excuses nothing: its crash is the service's.
//   - replay-fidelity: every answer for a key and its body after the first
//     success equals that success.
//   - status-codes: the answers draft-ietf-httpapi-idempotency-key-header
//     names: 400 for a missing (when the key is required) or over-long
//     key, 422 (or 409 while the key is in flight) for a key reused with
//     another body and never a success, and 409 only while another request
//     of the key is in flight. A success for a reused key ran as new when
//     the ledger charged the reused body's order, else it is an old answer;
//     ran as new, it is a violation only if the service had the key (its
//     own order charged, or a success for it): a key whose every request
//     was lost is new to the service.
//   - liveness: once every fault has healed (every killed instance started
//     again), every key left unsettled gets a definite answer
//     ([history.Final]); a 5xx is one only when the key's charge went
//     through and the service may lack its outcome (the provider failed
//     it, the service hung up, or no client ever got a success for the
//     key): a saved error, replayed; 409, 423, 429, any other 5xx, or
//     no answer is a violation with its status, except a key held in
//     flight after its owner died with no in-flight TTL declared, which
//     is not judged ([Result.Unjudged]).
//
// It reads the history and the ledger only.
package httpcheck

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// The checkers, by name.
const (
	Answers    = "answers"
	AtMostOnce = "at-most-once"
	Replay     = "replay-fidelity"
	Status     = "status-codes"
	Liveness   = "liveness"
)

// Causes of an at-most-once violation.
const (
	CauseConcurrent = "concurrent"  // both executions ran at once
	CauseAfterError = "after-error" // the second came after the provider (or the service) answered an error
	CauseAfterDone  = "after-done"  // the second came after the first had finished
)

// Causes of a status-codes violation.
const (
	CauseMissing  = "400-missing-key"
	CauseLong     = "400-long-key"
	CauseReuse    = "422-old-answer" // a reused key got an answer without a new charge
	CauseReuseRan = "422-ran-as-new" // a reused key ran as a new request
	Cause409      = "409-not-in-flight"
)

// Causes of a liveness violation: the status a key still got once every
// fault had healed.
const (
	CauseInFlight    = "in-flight"    // 409
	CauseLocked      = "locked"       // 423
	CauseThrottled   = "throttled"    // 429, 425 or 408
	CauseServerError = "server-error" // a 5xx with no failed charge behind it
	CauseNoAnswer    = "no-answer"    // no HTTP answer at all
)

// Cause of an answers violation.
const CauseNothingTested = "nothing-tested"

// Causes names, by checker, the causes its violations may carry.
var Causes = map[string][]string{
	Answers:    {CauseNothingTested},
	AtMostOnce: {CauseConcurrent, CauseAfterError, CauseAfterDone},
	Replay:     nil,
	Status:     {CauseMissing, CauseLong, CauseReuse, CauseReuseRan, Cause409},
	Liveness:   {CauseInFlight, CauseLocked, CauseThrottled, CauseServerError, CauseNoAnswer},
}

// Violation is one broken promise, on one key (or order).
type Violation struct {
	Checker string `json:"checker"`
	Key     string `json:"key"`
	Cause   string `json:"cause,omitempty"`
	Detail  string `json:"detail"`
	// At is the history time the violation shows at (the second charge,
	// the bad answer), for the timeline.
	At int64 `json:"at"`
}

// Result is one checker's verdict: Applied says whether the run held
// evidence it judges (a checker that did not apply passes vacuously and
// says so).
type Result struct {
	Checker string   `json:"checker"`
	Applied bool     `json:"applied"`
	Pass    bool     `json:"pass"`
	Detail  string   `json:"detail"`
	Notes   []string `json:"notes,omitempty"` // findings that are not violations
	// Unjudged says what the checker saw but could not judge either way
	// ("" when it judged everything it saw): a run whose checkers found
	// no violation but left something unjudged is undecided, not a pass.
	Unjudged   string      `json:"unjudged,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
}

// Policy is what the service declared about its keys: each declaration
// widens what the checkers accept.
type Policy struct {
	// KeyOptional: a request without a key is served as a plain request,
	// not answered 400.
	KeyOptional bool `json:"key_optional,omitempty"`
	// InFlightTTL is how long a key stays in flight after its owner died;
	// the final probes run at least that long (0: not declared).
	InFlightTTL time.Duration `json:"inflight_ttl,omitempty"`
	// Settle is how long the final probes ran once every fault healed.
	Settle time.Duration `json:"settle,omitempty"`
}

// Evidence is what a black-box run recorded, and what the service
// declared.
type Evidence struct {
	Hist   *history.History
	Ledger *history.Ledger
	Policy Policy
}

// Run runs the checkers, the answers checker first.
func Run(e Evidence) []Result {
	xs := e.Hist.Exchanges()
	fs := e.Hist.Faults()
	charges := e.Ledger.Charges()
	replay := checkReplay(xs)
	if w := Weakened(xs, charges); w != "" {
		replay.Notes = append(replay.Notes, w)
	}
	return []Result{
		checkAnswers(xs, charges),
		checkAtMostOnce(xs, charges, fs),
		replay,
		checkStatus(xs, charges, e.Policy),
		checkLiveness(xs, charges, fs, e.Policy),
	}
}

func finish(r Result, vs []Violation) Result {
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].At < vs[j].At })
	r.Violations = vs
	r.Pass = len(vs) == 0
	if !r.Pass {
		r.Detail = fmt.Sprintf("%d violation(s); first: %s", len(vs), vs[0].Detail)
	}
	return r
}

// Interrupted is results of a run an interrupt cut short (during says
// when): liveness judged final probes that did not run to their end, and
// a failed answers judged a run too short to say whether anything was
// tested, so neither judges ([Result.Unjudged]); the other checkers keep
// what they found in what was recorded, a violation there being one
// whatever came after.
func Interrupted(results []Result, during string) []Result {
	out := make([]Result, len(results))
	for i, r := range results {
		switch {
		case r.Checker == Liveness:
			r.Pass, r.Violations = true, nil
			r.Unjudged = "the run was interrupted " + during + ": the final probes did not run to their end"
		case r.Checker == Answers && !r.Pass:
			r.Pass, r.Violations = true, nil
			r.Unjudged = "the run was interrupted " + during + ", too soon to say whether anything was tested"
		}
		out[i] = r
	}
	return out
}

// Causes lists the distinct causes of a result's violations.
func (r Result) Causes() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range r.Violations {
		if v.Cause != "" && !seen[v.Cause] {
			seen[v.Cause] = true
			out = append(out, v.Cause)
		}
	}
	sort.Strings(out)
	return out
}

// CauseCounts counts a result's violations by cause ("" for none).
func (r Result) CauseCounts() map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Cause]++
	}
	return m
}

func ms(t int64) string { return history.Millis(t) }

func success(status int) bool { return status >= 200 && status < 300 }

// keyedOwn reports whether x carries its key's own body (not a reuse's).
func keyedOwn(x history.Exchange) bool {
	switch x.Purpose {
	case history.PurposeFirst, history.PurposeRetry, history.PurposeRace, history.PurposeReplay, history.PurposeProbe:
		return x.HasKey
	}
	return false
}

// checkAnswers fails a run in which most keys never got a success: the
// service refused what idemcheck sent (a key format it rejects, a missing
// header, a body it cannot read) or was down, and the other verdicts
// judged next to nothing. It fails too when keys got successes but the
// provider saw no charge of any order idemcheck sent: the service never
// called it, or told it something else than the order, and at-most-once
// judged nothing.
func checkAnswers(xs []history.Exchange, charges []history.Charge) Result {
	ok := map[string]bool{}
	statuses := map[string]int{}
	requests := 0
	for _, x := range xs {
		if !keyedOwn(x) {
			continue
		}
		requests++
		if _, seen := ok[x.Key]; !seen {
			ok[x.Key] = false
		}
		if success(x.Status) {
			ok[x.Key] = true
			continue
		}
		s := "no answer"
		if x.Answered() {
			s = fmt.Sprint(x.Status)
		}
		statuses[s]++
	}
	// A key without a success whose own order the provider charged was
	// tested all the same: the service ran it once and answers the error
	// it saved when the provider failed the charge, or when its deadline
	// passed first (--provider-fail, --provider-latency).
	ownOrder := map[string]string{}
	for _, x := range xs {
		if keyedOwn(x) {
			ownOrder[x.Key] = x.Order
		}
	}
	chargedOrder := map[string]bool{}
	for _, c := range charges {
		chargedOrder[c.Order] = true
	}
	failed, savedErr := 0, 0
	for k, v := range ok {
		switch {
		case v:
		case chargedOrder[ownOrder[k]]:
			savedErr++
		default:
			failed++
		}
	}
	r := Result{Checker: Answers, Applied: len(ok) > 0}
	if len(ok) == 0 {
		r.Detail = "no keyed request was sent"
		return finish(r, nil)
	}
	r.Detail = fmt.Sprintf("%d of %d keys got a success", len(ok)-failed-savedErr, len(ok))
	if savedErr > 0 {
		r.Detail += fmt.Sprintf(", %d more an error after the provider charged their order", savedErr)
	}
	if 2*failed <= len(ok) {
		orders := map[string]bool{}
		for _, x := range xs {
			orders[x.Order] = true
		}
		known := 0
		for _, c := range charges {
			if orders[c.Order] {
				known++
			}
		}
		if known > 0 {
			return finish(r, nil)
		}
		why := "the provider saw no charge: the service never called it (is IDEM_PROVIDER_URL passed?)"
		if len(charges) > 0 {
			why = fmt.Sprintf("the provider saw %d charges, none of an order idemcheck sent (does the service send the order it got at --order-at as \"order\"?)", len(charges))
		}
		return finish(r, []Violation{{Checker: Answers, Key: "(all)", Cause: CauseNothingTested, Detail: fmt.Sprintf(
			"%d of %d keys got a success, but %s: nothing was tested", len(ok)-failed-savedErr, len(ok), why)}})
	}
	top, n := "", 0
	for s, c := range statuses {
		if c > n || c == n && s < top {
			top, n = s, c
		}
	}
	verb := "answered " + top + " to"
	if top == "no answer" {
		verb = "gave no answer to"
	}
	return finish(r, []Violation{{Checker: Answers, Key: "(all)", Cause: CauseNothingTested, Detail: fmt.Sprintf(
		"the service %s %d%% of keyed requests (%d of %d) and %d of %d keys never got a success: nothing was tested (see the answers in history.jsonl: a key format, a header or a body the service refuses?)",
		verb, 100*n/requests, n, requests, failed, len(ok))}})
}

// checkReplay judges that every answer after a key's first success, for
// the same body, equals it.
func checkReplay(xs []history.Exchange) Result {
	type kb struct{ key, body string }
	firsts := map[kb]history.Exchange{}
	for _, x := range xs {
		if !x.HasKey || !success(x.Status) {
			continue
		}
		k := kb{x.Key, x.Body}
		if f, ok := firsts[k]; !ok || x.Return < f.Return {
			firsts[k] = x
		}
	}
	r := Result{Checker: Replay, Applied: len(firsts) > 0}
	var vs []Violation
	judged := 0
	bad := map[kb]bool{}
	for _, x := range xs {
		k := kb{x.Key, x.Body}
		f, ok := firsts[k]
		if !ok || !x.Answered() || x.Call <= f.Return || bad[k] {
			continue
		}
		judged++
		if x.Status != f.Status || x.Reply != f.Reply {
			bad[k] = true
			vs = append(vs, Violation{Checker: Replay, Key: x.Key, At: x.Return, Detail: fmt.Sprintf(
				"key %s: client %d got %d %q from %s at %s after client %d got %d %q from %s at %s",
				x.Key, x.Client, x.Status, clip(x.Reply), x.Instance, ms(x.Return), f.Client, f.Status, clip(f.Reply), f.Instance, ms(f.Return))})
		}
	}
	r.Detail = fmt.Sprintf("%d answers after a key's first success, all equal to it", judged)
	if judged == 0 {
		r.Applied = false
		r.Detail = "no answer came after a key's first success"
	}
	return finish(r, vs)
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// outstanding reports whether another exchange of x's key was in flight
// when x was answered: sent before x's answer and not answered before x
// was sent (a request with no answer may still be running).
func outstanding(same []history.Exchange, x history.Exchange) bool {
	for _, o := range same {
		if o.Call == x.Call && o.Client == x.Client {
			continue
		}
		if o.Call < x.Return && ends(o) > x.Call {
			return true
		}
	}
	return false
}

// checkStatus judges the draft's status codes.
func checkStatus(xs []history.Exchange, charges []history.Charge, p Policy) Result {
	charged := map[string]bool{}
	for _, c := range charges {
		if c.Effective {
			charged[c.Order] = true
		}
	}
	byKey := map[string][]history.Exchange{}
	for _, x := range xs {
		if x.HasKey {
			byKey[x.Key] = append(byKey[x.Key], x)
		}
	}
	// Every success of each key with its own body, to say which earlier
	// answer a reuse got.
	answers := map[string][]history.Exchange{}
	for _, x := range xs {
		if keyedOwn(x) && success(x.Status) {
			answers[x.Key] = append(answers[x.Key], x)
		}
	}
	// Whether the service ever had each key with its own body: a charge
	// of the key's own order, or a success for it. A reuse that ran as
	// new is a violation only then; otherwise the reuse may be the first
	// request of its key the service saw (every attempt with the key's
	// own body lost on the way, as with --attempts 1 through faults), and
	// running it is what the service must do.
	ownOrder := map[string]string{}
	for _, x := range xs {
		if keyedOwn(x) {
			ownOrder[x.Key] = x.Order
		}
	}
	chargedAtAll := map[string]bool{}
	for _, c := range charges {
		chargedAtAll[c.Order] = true
	}
	known := func(key string) bool { return len(answers[key]) > 0 || chargedAtAll[ownOrder[key]] }
	counts := map[string]int{}
	var vs []Violation
	for _, x := range xs {
		if !x.Answered() {
			continue
		}
		switch {
		case x.Purpose == history.PurposeMissing && !p.KeyOptional:
			counts["missing key"]++
			if x.Status != http.StatusBadRequest {
				vs = append(vs, Violation{Checker: Status, Key: "(none)", Cause: CauseMissing, At: x.Return, Detail: fmt.Sprintf(
					"a request with no Idempotency-Key got %d from %s at %s, not 400", x.Status, x.Instance, ms(x.Return))})
			}
		case x.Purpose == history.PurposeLong:
			counts["over-long key"]++
			if x.Status != http.StatusBadRequest {
				vs = append(vs, Violation{Checker: Status, Key: clip(x.Key), Cause: CauseLong, At: x.Return, Detail: fmt.Sprintf(
					"a %d-byte key got %d from %s at %s, not 400", len(x.Key), x.Status, x.Instance, ms(x.Return))})
			}
		case x.Purpose == history.PurposeReuse:
			counts["key reused with another body"]++
			if success(x.Status) && (!charged[x.Order] || known(x.Key)) {
				cause, why := CauseReuseRan, fmt.Sprintf("the provider charged its order %s: it ran as a new request (the instance did not know the key)", x.Order)
				if !charged[x.Order] {
					cause, why = CauseReuse, "the provider never charged its order: it got an earlier answer of the key (the service does not fingerprint the request)"
					for _, a := range answers[x.Key] {
						if a.Reply == x.Reply && a.Return < x.Return {
							why = fmt.Sprintf("the provider never charged its order, and the answer is the one client %d got at %s: the service does not fingerprint the request", a.Client, ms(a.Return))
							break
						}
					}
				}
				vs = append(vs, Violation{Checker: Status, Key: x.Key, Cause: cause, At: x.Return, Detail: fmt.Sprintf(
					"key %s reused with another body (order %s) got %d %q from %s at %s, not 422: %s",
					x.Key, x.Order, x.Status, clip(x.Reply), x.Instance, ms(x.Return), why)})
			}
		}
		if x.Status == http.StatusConflict && x.HasKey {
			counts["409"]++
			if !outstanding(byKey[x.Key], x) {
				vs = append(vs, Violation{Checker: Status, Key: x.Key, Cause: Cause409, At: x.Return, Detail: fmt.Sprintf(
					"key %s got 409 from %s at %s while no other request of the key was in flight", x.Key, x.Instance, ms(x.Return))})
			}
		}
	}
	r := Result{Checker: Status, Applied: len(counts) > 0}
	var parts []string
	for _, k := range []string{"missing key", "over-long key", "key reused with another body", "409"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	r.Detail = "judged " + strings.Join(parts, ", ")
	if !r.Applied {
		r.Detail = "no answer to a missing, over-long or reused key, and no 409"
	}
	return finish(r, vs)
}

// checkLiveness reads the final probes: each key probed after every fault
// healed must have got a definite answer ([history.Final]), or the same
// 5xx for an order whose charge the provider failed (a saved error,
// replayed). A key still refused with 409, 423 or 429, answered a 5xx
// the ledger does not explain, or not answered at all, is stuck.
func checkLiveness(xs []history.Exchange, charges []history.Charge, fs []history.Fault, p Policy) Result {
	last := map[string]history.Exchange{}
	first := map[string]int64{}
	var order []string
	for _, x := range xs {
		if x.Purpose != history.PurposeProbe {
			continue
		}
		if _, ok := last[x.Key]; !ok {
			order = append(order, x.Key)
			first[x.Key] = x.Call
		}
		last[x.Key] = x
	}
	// The orders whose charge took effect but whose outcome the service
	// may not have: the provider failed it or the service hung up first
	// (errored), or the provider answered it but no client ever got a
	// success for the key (unanswered: the service's own deadline may
	// have passed as the answer was on its way, and the provider cannot
	// tell a written answer from a read one). Either way the charge went
	// through, so a correct service must never run it again, and a saved
	// error replayed is its definite answer.
	errored, unanswered := map[string]bool{}, map[string]bool{}
	succeededKey := map[string]bool{}
	for _, x := range xs {
		if keyedOwn(x) && success(x.Status) {
			succeededKey[x.Key] = true
		}
	}
	for _, c := range charges {
		if c.Effective && c.Errored() {
			errored[c.Order] = true
		} else if c.Effective {
			unanswered[c.Order] = true
		}
	}
	crashes := 0
	for _, f := range fs {
		if f.Kind == history.FaultInstanceKill || f.Kind == history.FaultInstancePause || f.Kind == history.FaultInstanceExit {
			crashes++
		}
	}
	r := Result{Checker: Liveness, Applied: len(order) > 0,
		Detail: fmt.Sprintf("%d keys left unsettled by the faults all got a definite answer once healed (%d instance kills, pauses or exits)", len(order), crashes)}
	if !r.Applied {
		r.Detail = "every key was settled before the end: nothing to probe"
	}
	orphaned := orphans(xs, fs)
	saved, lostAnswer := 0, 0
	var unjudged []string
	var vs []Violation
	for _, k := range order {
		x := last[k]
		if history.Final(x.Status) {
			continue
		}
		if x.Status >= 500 && errored[x.Order] {
			saved++
			continue
		}
		if x.Status >= 500 && unanswered[x.Order] && !succeededKey[k] {
			lostAnswer++
			continue
		}
		if (x.Status == http.StatusConflict || x.Status == http.StatusLocked) && p.InFlightTTL == 0 && orphaned[k] {
			unjudged = append(unjudged, k)
			continue
		}
		cause, got := CauseNoAnswer, "no answer ("+x.Err+")"
		switch {
		case x.Status == http.StatusConflict:
			cause, got = CauseInFlight, "409 (still in flight)"
		case x.Status == http.StatusLocked:
			cause, got = CauseLocked, "423 (still locked)"
		case x.Status >= 500:
			cause, got = CauseServerError, fmt.Sprintf("%d %q, and the provider failed no charge of its order %s", x.Status, clip(x.Reply), x.Order)
		case x.Answered():
			cause, got = CauseThrottled, fmt.Sprintf("%d (try again later)", x.Status)
		}
		span := time.Duration(x.Call - first[k]).Round(time.Millisecond)
		ttl := ""
		switch {
		case p.InFlightTTL > 0:
			ttl = fmt.Sprintf("; the declared in-flight TTL is %v", p.InFlightTTL)
		case cause == CauseInFlight || cause == CauseLocked:
			ttl = "; no in-flight TTL declared: if the service releases the key later, declare it (--inflight-ttl)"
		}
		vs = append(vs, Violation{Checker: Liveness, Key: k, Cause: cause, At: x.Call, Detail: fmt.Sprintf(
			"key %s still got %s from %s at %s, after every fault had healed (%d probes over %v%s)", k, got, x.Instance, ms(x.Call), x.Attempt, span, ttl)})
	}
	if saved > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d keys answer a 5xx for a charge the provider failed: a saved error, replayed (the charge went through, so it is never run again)", saved))
	}
	if lostAnswer > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d keys answer a 5xx for a charge the provider made and answered, though no client ever got a success for them: the service did not get the charge id (its deadline passed as the answer came) and replays its saved error; the charge went through, so it is never run again", lostAnswer))
	}
	if len(unjudged) > 0 {
		r.Detail = fmt.Sprintf("%d of %d keys left unsettled by the faults got a definite answer once healed (%d instance kills, pauses or exits)", len(order)-len(unjudged), len(order), crashes)
		r.Unjudged = fmt.Sprintf("%d keys (first %s) were still in flight at the end of the probes, each after an instance died while one of its requests was there: a correct service holds such a key until its in-flight TTL, which was not declared; declare it (--inflight-ttl) to judge them", len(unjudged), unjudged[0])
	}
	return finish(r, vs)
}

// orphans names the keys that may have been left in flight by an owner
// that died: a request of the key was at an instance (sent, not yet
// answered) when idemcheck killed it or it exited by itself. A correct
// service keeps such a key in flight until its own TTL runs out, which
// only the service knows.
func orphans(xs []history.Exchange, fs []history.Fault) map[string]bool {
	deaths := map[string][]int64{}
	for _, f := range fs {
		if f.Kind == history.FaultInstanceKill || f.Kind == history.FaultInstanceExit {
			deaths[f.Failpoint] = append(deaths[f.Failpoint], f.Start)
		}
	}
	out := map[string]bool{}
	for _, x := range xs {
		if !x.HasKey || x.Purpose == history.PurposeProbe || out[x.Key] {
			continue
		}
		for _, at := range deaths[x.Instance] {
			if x.Call <= at && (!x.Answered() || x.Return >= at) {
				out[x.Key] = true
				break
			}
		}
	}
	return out
}

// ends is when an exchange was certainly over for the service as far as
// the client knows: its answer, its refused connection, or never.
func ends(x history.Exchange) int64 { return closedAt(x, nil) }
