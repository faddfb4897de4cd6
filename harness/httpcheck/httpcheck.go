// Package httpcheck judges a black-box run (idemcheck http): the HTTP
// exchanges the clients recorded plus the effects the payment provider
// counted. Its checkers, each saying whether it applied (whether the run
// held the evidence it judges) and, when it failed, what kind of bug the
// evidence points to:
//
//   - at-most-once: each order was charged at most once. A second charge is
//     classed by what happened between the two: both ran at once (a lock
//     that is not shared between instances), the second came after an
//     error answer (a claim released although the charge went through),
//     or after the first had finished (a record lost or not shared: a map
//     in memory, a restart). A second charge after the instance that made
//     the first was killed between the two, when no client ever saw the
//     first, is excused:
//     an owner that dies between the effect and saving it cannot be told
//     from one that died before the effect (at-least-once after a crash).
//   - replay-fidelity: every answer for a key and its body after the first
//     success equals that success.
//   - status-codes: the answers draft-ietf-httpapi-idempotency-key-header
//     names: 400 for a missing or over-long key, 422 (or 409 while the key
//     is in flight) for a key reused with another body and never a
//     success, and 409 only while another request of the key is in flight.
//     A success for a reused key is classed by its body: the first body's
//     answer (no fingerprint) or a new one (the key was not known).
//   - liveness: once every fault has healed (every killed instance
//     started again), no key stays unanswerable or in flight.
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
	AtMostOnce = "at-most-once"
	Replay     = "replay-fidelity"
	Status     = "status-codes"
	Liveness   = "liveness"
)

// Causes of an at-most-once violation.
const (
	CauseConcurrent = "concurrent"  // both executions ran at once
	CauseAfterError = "after-error" // the second came after an error answer
	CauseAfterDone  = "after-done"  // the second came after the first had finished
)

// Causes of a status-codes violation.
const (
	CauseMissing  = "400-missing-key"
	CauseLong     = "400-long-key"
	CauseReuse    = "422-old-answer" // a reused key got the first body's answer
	CauseReuseRan = "422-ran-as-new" // a reused key ran as a new request
	Cause409      = "409-not-in-flight"
)

// Causes names, by checker, the causes its violations may carry.
var Causes = map[string][]string{
	AtMostOnce: {CauseConcurrent, CauseAfterError, CauseAfterDone},
	Replay:     nil,
	Status:     {CauseMissing, CauseLong, CauseReuse, CauseReuseRan, Cause409},
	Liveness:   nil,
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
	Checker    string      `json:"checker"`
	Applied    bool        `json:"applied"`
	Pass       bool        `json:"pass"`
	Detail     string      `json:"detail"`
	Notes      []string    `json:"notes,omitempty"` // findings that are not violations
	Violations []Violation `json:"violations,omitempty"`
}

// Evidence is what a black-box run recorded.
type Evidence struct {
	Hist   *history.History
	Ledger *history.Ledger
}

// Run runs every checker.
func Run(e Evidence) []Result {
	xs := e.Hist.Exchanges()
	fs := e.Hist.Faults()
	return []Result{
		checkAtMostOnce(xs, e.Ledger.Charges(), fs),
		checkReplay(xs),
		checkStatus(xs),
		checkLiveness(xs, fs),
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

func ms(t int64) string { return history.Millis(t) }

func success(status int) bool { return status >= 200 && status < 300 }

// ends is when an exchange's request was certainly over for the service
// as far as the client knows: its answer, or never (no answer came).
func ends(x history.Exchange) int64 {
	if x.Answered() {
		return x.Return
	}
	return history.Never
}

// checkAtMostOnce judges the ledger: one effect per order.
func checkAtMostOnce(xs []history.Exchange, charges []history.Charge, fs []history.Fault) Result {
	byOrder := map[string][]history.Charge{}
	for _, c := range charges {
		if c.Effective {
			byOrder[c.Order] = append(byOrder[c.Order], c)
		}
	}
	xByOrder := map[string][]history.Exchange{}
	for _, x := range xs {
		xByOrder[x.Order] = append(xByOrder[x.Order], x)
	}
	r := Result{Checker: AtMostOnce, Applied: len(charges) > 0,
		Detail: fmt.Sprintf("%d orders charged, none twice", len(byOrder))}
	if !r.Applied {
		r.Detail = "the provider saw no charge: the service never called it (is its URL passed?)"
	}
	var vs []Violation
	for order, cs := range byOrder {
		if len(cs) < 2 {
			continue
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].At < cs[j].At })
		oxs := xByOrder[order]
		for i := 1; i < len(cs); i++ {
			first, second := cs[i-1], cs[i]
			if killedBetween(fs, first.Via, first.At, second.At) && !delivered(oxs, first.ID, second.At) {
				r.Notes = append(r.Notes, fmt.Sprintf("order %s charged again (%s after %s) after an instance was killed between the two, and no client saw %s: at-least-once after a crash, excused",
					order, second.ID, first.ID, first.ID))
				continue
			}
			cause, why := classify(oxs, first, second)
			if d := stalled(fs, first.At, second.At); d > 0 {
				why += fmt.Sprintf(" (idemcheck itself stood still for %v between them: a charge held that long may outlive a lock TTL that is too short)", d)
			}
			key := order
			if len(oxs) > 0 {
				key = oxs[0].Key
			}
			vs = append(vs, Violation{Checker: AtMostOnce, Key: key, Cause: cause, At: second.At, Detail: fmt.Sprintf(
				"order %s (key %s) charged twice: %s by %s at %s, %s by %s at %s: %s",
				order, key, first.ID, via(first), ms(first.At), second.ID, via(second), ms(second.At), why)})
			break
		}
	}
	return finish(r, vs)
}

func via(c history.Charge) string {
	if c.Via == "" {
		return "an instance"
	}
	return c.Via
}

// stalled is how long idemcheck's own process stood still between from
// and to.
func stalled(fs []history.Fault, from, to int64) time.Duration {
	var d time.Duration
	for _, f := range fs {
		if f.Kind == history.FaultStall && f.End >= from && f.Start <= to {
			d += time.Duration(f.End - f.Start)
		}
	}
	return d.Round(time.Millisecond)
}

// killedBetween reports whether the instance (any, when the provider could
// not tell which) was down at some time between from and to: a kill's
// window runs from the signal to the restart, and a charge the provider
// counts just after the signal was sent just before the process died.
func killedBetween(fs []history.Fault, inst string, from, to int64) bool {
	for _, f := range fs {
		if f.Kind == history.FaultInstanceKill && (inst == "" || f.Failpoint == inst) && f.End >= from && f.Start <= to {
			return true
		}
	}
	return false
}

// delivered reports whether some client got an answer naming charge id
// before t.
func delivered(xs []history.Exchange, id string, t int64) bool {
	for _, x := range xs {
		if x.Answered() && x.Return < t && strings.Contains(x.Reply, `"`+id+`"`) {
			return true
		}
	}
	return false
}

// classify says what happened between two charges of one order, from the
// exchanges of the order: an error answer in between (the claim was
// released on an error that had taken effect), every request that could
// have made the first charge already answered before the second (the
// record of the first was lost or not shared), or else both ran at once.
func classify(xs []history.Exchange, first, second history.Charge) (string, string) {
	for _, x := range xs {
		if x.Answered() && x.Status >= 500 && x.Return > first.At && x.Return < second.At {
			return CauseAfterError, fmt.Sprintf(
				"client %d got %d from %s at %s between the two: the claim was released after an error although the charge went through (release on error)",
				x.Client, x.Status, x.Instance, ms(x.Return))
		}
	}
	over := false
	for _, x := range xs {
		if x.Call < first.At {
			over = true
			if ends(x) > second.At {
				over = false
				break
			}
		}
	}
	if over {
		return CauseAfterDone, "every request that could have made the first charge had been answered before the second: the service forgot the key (a record lost on restart, or kept per instance)"
	}
	return CauseConcurrent, "both executions ran while the first request was still open: two requests held the key at once (a lock that is not shared between instances)"
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
func checkStatus(xs []history.Exchange) Result {
	byKey := map[string][]history.Exchange{}
	for _, x := range xs {
		if x.HasKey {
			byKey[x.Key] = append(byKey[x.Key], x)
		}
	}
	// The first success of each key with its first body, to tell an old
	// answer from a new one.
	firstOK := map[string]history.Exchange{}
	for _, x := range xs {
		if x.HasKey && x.Purpose != history.PurposeReuse && success(x.Status) {
			if f, ok := firstOK[x.Key]; !ok || x.Return < f.Return {
				firstOK[x.Key] = x
			}
		}
	}
	counts := map[string]int{}
	var vs []Violation
	for _, x := range xs {
		if !x.Answered() {
			continue
		}
		switch {
		case x.Purpose == history.PurposeMissing:
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
			if success(x.Status) {
				cause, why := CauseReuseRan, "it ran as a new request: the instance did not know the key"
				if f, ok := firstOK[x.Key]; ok && f.Reply == x.Reply {
					cause, why = CauseReuse, "it is the first body's answer: the service does not fingerprint the request"
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
// healed must have got an answer that is not 409.
func checkLiveness(xs []history.Exchange, fs []history.Fault) Result {
	last := map[string]history.Exchange{}
	var order []string
	for _, x := range xs {
		if x.Purpose != history.PurposeProbe {
			continue
		}
		if _, ok := last[x.Key]; !ok {
			order = append(order, x.Key)
		}
		last[x.Key] = x
	}
	crashes := 0
	for _, f := range fs {
		if f.Kind == history.FaultInstanceKill || f.Kind == history.FaultInstancePause {
			crashes++
		}
	}
	r := Result{Checker: Liveness, Applied: len(order) > 0,
		Detail: fmt.Sprintf("%d keys left unsettled by the faults all answered once healed (%d instance kills or pauses)", len(order), crashes)}
	if !r.Applied {
		r.Detail = "every key was settled before the end: nothing to probe"
	}
	var vs []Violation
	for _, k := range order {
		x := last[k]
		if x.Answered() && x.Status != http.StatusConflict {
			continue
		}
		got := "no answer (" + x.Err + ")"
		if x.Answered() {
			got = "409: still in flight"
		}
		vs = append(vs, Violation{Checker: Liveness, Key: k, At: x.Call, Detail: fmt.Sprintf(
			"key %s still got %s from %s at %s, after every fault had healed (%d probes)", k, got, x.Instance, ms(x.Call), x.Attempt)})
	}
	return finish(r, vs)
}
