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
//     tested nothing, and says so before any other verdict. A success
//     answered for an order the provider never charged, in the whole
//     run, is a violation: a client told its payment went through when
//     it never did.
//   - at-most-once: each order was charged at most once. A second charge
//     is classed by what happened between the two: it came while the
//     provider was still making the first or while the request that made
//     it was still open (a lock that is not shared), after the provider
//     failed the first (a claim released although the charge went
//     through), or after the first had finished (a record lost or not
//     shared). A second charge after idemcheck killed the instance that
//     made the first, when no client got a success for the order between
//     the two, is excused: an owner killed between the effect and saving
//     it cannot be told from one killed before the effect. So is one
//     while idemcheck paused an instance across either charge (an owner
//     paused past its lease is, to the service, an owner that died). An
//     instance that exits by itself excuses nothing: its crash is the
//     service's.
//   - replay-fidelity: every answer for a key and its body after the first
//     success equals that success, but those a limiter, a timeout or a
//     gateway gives without reading the key ([history.TryAgain]), noted.
//   - status-codes: the answers draft-ietf-httpapi-idempotency-key-header
//     names: 400 for a missing (when the key is required) or over-long
//     key, 422 (or 409 while the key is in flight) for a key reused with
//     another body and never a success, and 409 only while another request
//     of the key may be in flight ([heldUntil]). A success for a reused
//     key ran as new when the ledger charged the reused body's order, else
//     it is an old answer;
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
//     flight after its owner died or gave up (answered 5xx, 202 or 408,
//     or not at all) with no in-flight TTL declared, and one
//     not answered, or refused by a limiter ([history.TryAgain]), while the
//     service answered few of the other calls beside it, which are not
//     judged ([Result.Unjudged]).
//
// It reads the history and the ledger only.
package httpcheck

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"sort"
	"strconv"
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
	CauseAfterCrash = "after-crash" // the first's instance exited by itself before it could save the charge's outcome
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
	Answers:    {CauseNothingTested, CauseNeverCharged},
	AtMostOnce: {CauseConcurrent, CauseAfterError, CauseAfterDone, CauseAfterCrash},
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
	// InFlightTTL is how long a key stays in flight after its owner died
	// or gave up ([orphans]); the final probes run at least that long
	// (0: not declared).
	InFlightTTL time.Duration `json:"inflight_ttl,omitempty"`
	// Settle is how long the final probes ran once every fault healed.
	Settle time.Duration `json:"settle,omitempty"`
	// SavesErrors: the service saves its 5xx answers and replays them
	// for the key, whatever caused them (Stripe does): a key whose final
	// probes replay one 5xx is settled. Undeclared, such a key whose
	// order the provider never charged is not judged.
	SavesErrors bool `json:"saves_errors,omitempty"`
	// ReplayAny2xx: the service replays a success with the first one's
	// body but perhaps another completed 2xx (201 Created first, 200 on a
	// replay, as PayPal does): replay-fidelity then compares the bodies
	// alone between two such statuses. Undeclared, the status must be
	// the same.
	ReplayAny2xx bool `json:"replay_any_2xx,omitempty"`
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
	keys := factsOf(xs, charges)
	replay := checkReplay(xs, e.Policy)
	if w := Weakened(xs, charges); w != "" {
		replay.Notes = append(replay.Notes, w)
	}
	return []Result{
		checkAnswers(xs, charges, keys, e.Policy),
		checkAtMostOnce(xs, charges, fs, e.Policy),
		replay,
		checkStatus(xs, charges, fs, keys, e.Policy),
		checkLiveness(xs, charges, fs, keys, e.Policy),
	}
}

// Unreached is results of a run in which nothing was tested
// ([NothingTested]; an interrupted run's answers say too soon to tell)
// and the provider saw no charge of an order idemcheck sent: the
// answers came from something that is not the service's payment
// endpoint (a wrong --path answered by a catch-all page, the order never
// passed on), so replay-fidelity and status-codes, which read the
// answers as the service's, do not judge ([Result.Unjudged]): their
// causes would name bugs of a service that was never reached. Other
// results are as they were.
func Unreached(results []Result, e Evidence, interrupted bool) []Result {
	if NothingTested(results, interrupted) == "" || chargedAny(e.Hist.Exchanges(), e.Ledger.Charges()) {
		return results
	}
	out := slices.Clone(results)
	for i, r := range out {
		if r.Checker == Replay || r.Checker == Status {
			out[i] = Result{Checker: r.Checker, Pass: true, Detail: "not judged: nothing was tested (see answers)",
				Unjudged: "the provider saw no charge of an order idemcheck sent: the service ran none of them (it refused them, as the answers checker says, or the answers came from something else, such as a catch-all page at a wrong --path), so they say nothing of how it keeps its keys"}
		}
	}
	return out
}

// chargedAny reports whether the provider saw a charge of any order the
// exchanges sent.
func chargedAny(xs []history.Exchange, charges []history.Charge) bool {
	orders := map[string]bool{}
	for _, x := range xs {
		orders[x.Order] = true
	}
	for _, c := range charges {
		if orders[c.Order] {
			return true
		}
	}
	return false
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
			r.Pass, r.Violations, r.Notes = true, nil, nil
			r.Detail = "not judged: the run was interrupted " + during
			r.Unjudged = "the run was interrupted " + during + ": the final probes did not run to their end"
		case r.Checker == Answers && !r.Pass:
			r.Pass, r.Violations = true, nil
			r.Detail = "not judged: the run was interrupted " + during
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

// completed reports whether a status is a success that carries the
// request's outcome: any 2xx but 202 Accepted, which says the request
// was taken to be processed later, not that it was (an asynchronous
// service answers 202 until the work is done, then its result).
func completed(status int) bool { return success(status) && status != http.StatusAccepted }

// mayStillRun reports whether an answer leaves open that the request's
// work goes on at the service: 202 (accepted, to run later), 408 and any
// 5xx (a timeout or a gateway answers so while the handler still runs,
// and a handler that failed may not know its work's outcome).
func mayStillRun(status int) bool {
	return status == http.StatusAccepted || status == http.StatusRequestTimeout || status >= 500
}

// tryAgainCodes names the codes of [history.TryAgain] in notes, read
// off it so that the two never disagree.
var tryAgainCodes = func() string {
	var cs []string
	for s := 100; s < 600; s++ {
		if history.TryAgain(s) {
			cs = append(cs, strconv.Itoa(s))
		}
	}
	return strings.Join(cs[:len(cs)-1], ", ") + " or " + cs[len(cs)-1] + " (a limiter, a timeout or a gateway answers so)"
}()

// sameReply reports whether two answers' bodies are the same answer:
// equal as text, or, both JSON, equal as values (a store that keeps the
// body as Postgres jsonb gives its fields back in another order, and
// may write a number another way: 1e2 for 100).
func sameReply(a, b string) bool {
	if a == b {
		return true
	}
	va, oka := jsonValue(a)
	vb, okb := jsonValue(b)
	return oka && okb && sameValue(va, vb)
}

// sameValue reports whether two decoded JSON values are equal, numbers
// by their value.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, oka := new(big.Rat).SetString(string(a))
		rb, okb := new(big.Rat).SetString(string(b))
		return oka && okb && ra.Cmp(rb) == 0
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// jsonValue decodes s as one JSON value, numbers kept as written.
func jsonValue(s string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// keyedOwn reports whether x carries its key's own body (not a reuse's).
func keyedOwn(x history.Exchange) bool {
	switch x.Purpose {
	case history.PurposeFirst, history.PurposeRetry, history.PurposeRace, history.PurposeReplay, history.PurposeProbe:
		return x.HasKey
	}
	return false
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// ends is when an exchange was certainly over for the service as far as
// the client knows: its answer, its refused connection, or never.
func ends(x history.Exchange) int64 { return closedAt(x, nil) }
