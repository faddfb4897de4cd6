package httpcheck

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/idemcheck/idemcheck/harness/history"
)

// checkAnswers fails a run in which most keys never got a success: the
// service refused what idemcheck sent (a key format it rejects, a missing
// header, a body it cannot read) or was down, and the other verdicts
// judged next to nothing. It fails too when keys got successes but the
// provider saw no charge of any order idemcheck sent: the service never
// called it, or told it something else than the order, and at-most-once
// judged nothing. A key every request of which a limiter, a timeout or
// a gateway refused ([history.TryAgain]) was not tested either: the
// notes count it apart from those the service refused. When the keys
// that never got a success were mostly refused that way, or not answered
// within --timeout, the run was more than the service takes: nothing was
// tested, and it is left unjudged ([NothingTested]) rather than failed.
// Where something was tested, a success answered for an order the
// provider never charged fails it ([neverCharged]).
func checkAnswers(xs []history.Exchange, charges []history.Charge, keys keyFacts, p Policy) Result {
	ok := map[string]bool{}
	statuses := map[string]int{}
	requests := 0
	// replays counts, per key, its 5xx answers equal to its one before
	// (a saved error, replayed: tested, when the service declared that it
	// saves its errors).
	lastErr, replays := map[string]history.Exchange{}, map[string]int{}
	reached := map[string]bool{}      // a request of the key got an answer but [history.TryAgain], or none
	answered := map[string]bool{}     // a request of the key got any HTTP answer
	firstRefused := map[string]bool{} // the key's first request was answered 422
	firstOrder := map[string]string{} // the order of the key's first operation
	shared, ops := 0, 0               // operations whose key another operation had drawn first, of all
	done := map[string]bool{}         // a request of the key got a success that carries its outcome (not 202)
	for _, x := range xs {
		if !keyedOwn(x) {
			continue
		}
		requests++
		if x.Purpose == history.PurposeFirst {
			switch o, seen := firstOrder[x.Key]; {
			case !seen:
				firstOrder[x.Key] = x.Order
				ops++
			case o != x.Order:
				shared++
				ops++
				firstOrder[x.Key] = x.Order // counted once per operation
			}
		}
		if x.Purpose == history.PurposeFirst && x.Answered() && x.Status == http.StatusUnprocessableEntity {
			firstRefused[x.Key] = true
		}
		if _, seen := ok[x.Key]; !seen {
			ok[x.Key] = false
		}
		if !x.Answered() || !history.TryAgain(x.Status) {
			reached[x.Key] = true
		}
		if x.Answered() {
			answered[x.Key] = true
		}
		if x.Status >= 500 {
			if replayed(lastErr[x.Key], x) {
				replays[x.Key]++
			}
			lastErr[x.Key] = x
		}
		if success(x.Status) {
			ok[x.Key] = true
			done[x.Key] = done[x.Key] || completed(x.Status)
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
	failed, savedErr, declared, limited, refused, silent := 0, 0, 0, 0, 0, 0
	for k, v := range ok {
		switch {
		case v:
		case keys.ownCharged(k):
			savedErr++
			if !answered[k] {
				silent++
			}
		case p.SavesErrors && replays[k] > 0:
			declared++
		case !reached[k]:
			limited++
		default:
			failed++
			if firstRefused[k] {
				refused++
			}
		}
	}
	r := Result{Checker: Answers, Applied: len(ok) > 0}
	if len(ok) == 0 {
		r.Detail = "no keyed request was sent"
		return finish(r, nil)
	}
	r.Detail = fmt.Sprintf("%d of %d keys got a success", len(ok)-failed-savedErr-declared-limited, len(ok))
	if n := savedErr - silent; n > 0 {
		r.Detail += fmt.Sprintf(", %d more an error after the provider charged their order", n)
	}
	if silent > 0 {
		// Said apart: a run whose service answered 192 of 46,493
		// requests said 14,575 keys got "an error".
		r.Detail += fmt.Sprintf(", %d more no answer at all (within --timeout) though the provider charged their order", silent)
	}
	if declared > 0 {
		r.Detail += fmt.Sprintf(", %d more replayed a saved 5xx (--saves-errors)", declared)
	}
	accepted, notes := acceptedOnly(ok, done, keys)
	if accepted > 0 {
		r.Detail += fmt.Sprintf(" (%d of them only 202 Accepted)", accepted)
	}
	r.Notes = append(r.Notes, notes...)
	if limited > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("not tested: %d keys got %s to every request, so none reached the service's idempotency as far as the answers tell", limited, tryAgainCodes))
	}
	if shared > 0 {
		const why = "(a --key-format of too few random digits ran out of fresh keys): each got the other's answer or a 422, and was not tested as an operation of its own (a wider %x, or %d)"
		switch {
		case 2*shared > ops:
			// Most of the run tested the key pattern, not the service:
			// a pass would stand on the few operations with keys of
			// their own (5,286 of 5,302 untested passed with a note).
			r.Unjudged = fmt.Sprintf("%d of %d operations were sent a key another operation had drawn first %s", shared, ops, why)
		case shared == 1:
			r.Notes = append(r.Notes, "not tested: 1 operation was sent a key another operation had drawn first "+why)
		default:
			r.Notes = append(r.Notes, fmt.Sprintf("not tested: %d operations were sent a key another operation had drawn first %s", shared, why))
		}
	}
	if refused > 0 {
		// Fewer than half the keys (more is nothing tested, below): the
		// run passed on the others and said nothing of these (32% of a
		// run's keys were an earlier run's).
		r.Notes = append(r.Notes, fmt.Sprintf("not tested: %d of %d keys got 422 to their first request and never a success, so their work was never run to judge: %s", refused, len(ok), refusedHint(http.StatusUnprocessableEntity)))
	}
	if len(ok)-failed-savedErr-declared-limited == 0 {
		// Tested, but never on the happy path: say what that leaves out.
		r.Notes = append(r.Notes, "no key got a success: no success was replayed, so replay-fidelity had nothing to compare, and no reuse of a key that succeeded was tried")
	}
	if 2*(failed+limited) <= len(ok) {
		if chargedAny(xs, charges) {
			return finish(r, neverCharged(xs, charges))
		}
		why := "the provider saw no charge: the service never called it (is IDEM_PROVIDER_URL passed? is the path its payment endpoint?)"
		if len(charges) > 0 {
			why = fmt.Sprintf("the provider saw %d charges, none of an order idemcheck sent (does the service send the order it got at --order-at as \"order\"?)", len(charges))
		}
		return finish(r, []Violation{{Checker: Answers, Key: "(all)", Cause: CauseNothingTested, Detail: fmt.Sprintf(
			"%d of %d keys got a success, but %s: nothing was tested", len(ok)-failed-savedErr-declared-limited, len(ok), why)}})
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
	code, _ := strconv.Atoi(top) // 0 for "no answer"
	if top == "no answer" || history.TryAgain(code) {
		// Refused for a while or not answered in time: the load was more
		// than the service takes at --timeout (it sheds load, a limiter
		// refuses, its queue outgrows the clients' patience). That is no
		// fault of its keys: nothing was tested, and nothing is judged.
		r.Unjudged = fmt.Sprintf(
			"the service %s %d%% of keyed requests (%d of %d) and %d of %d keys never got a success: nothing was tested, and that says nothing of its keys (a limiter, a circuit breaker, an overload or a gateway in front answering its own error pages refuses so, a --timeout shorter than its answers ends so: see the answers in history.jsonl; fewer --clients, a longer --timeout)",
			verb, 100*n/requests, n, requests, failed+limited, len(ok))
		r.Detail = nothingTestedDetail
		return finish(r, nil)
	}
	return finish(r, []Violation{{Checker: Answers, Key: "(all)", Cause: CauseNothingTested, Detail: fmt.Sprintf(
		"the service %s %d%% of keyed requests (%d of %d) and %d of %d keys never got a success: nothing was tested (see the answers in history.jsonl: %s)",
		verb, 100*n/requests, n, requests, failed+limited, len(ok), refusedHint(code))}})
}

// refusedHint says what a request the service refuses in code most
// likely got wrong, and the flag that declares it: a 404 is the path,
// not the key's header, and a 401 a credential.
func refusedHint(code int) string {
	switch code {
	case http.StatusNotFound:
		return "no such path: the path the service takes orders on is --path, or the --target URL's"
	case http.StatusMethodNotAllowed:
		return "the path does not take this method: --method?"
	case http.StatusUnauthorized, http.StatusForbidden:
		return "the service wants a credential: -H \"Authorization: ...\"?"
	case http.StatusUnsupportedMediaType:
		return "the service does not read this body's type: --body-type form, or -H \"Content-Type: ...\"?"
	}
	if code == http.StatusUnprocessableEntity {
		return "a 422 to a key's first request is a key the service already saw with another body: keys of an earlier run, which a --key-format without %s repeats (give it %s, or clear the service's keys), or a body the service refuses: --body?"
	}
	return "a key format, a header or a body the service refuses, or the key in a header it does not read: --key-format, --key-header, --body?"
}

// NothingTested is what the answers checker said of a run in which
// nothing was tested ("" when something was): its violation (the service
// refused what idemcheck sent), or what it left unjudged when the service
// was too busy to answer (an interrupted run's is not this: it was too
// soon to say).
func NothingTested(results []Result, interrupted bool) string {
	for _, r := range results {
		switch {
		case r.Checker != Answers:
		case !r.Pass:
			// Its nothing-tested violation: a success never charged is
			// a bug found in what was tested (a run of 18,108 requests
			// was headed NOTHING TESTED for one).
			for _, v := range r.Violations {
				if v.Cause == CauseNothingTested {
					return v.Detail
				}
			}
		case r.Unjudged != "" && r.Detail == nothingTestedDetail && !interrupted:
			// Not another thing the answers left unjudged (most
			// operations on keys others had drawn), which a run that
			// tested some keys printed as NOTHING TESTED.
			return r.Unjudged
		}
	}
	return ""
}

// nothingTestedDetail is the answers checker's detail when nothing was
// tested (NothingTested reads it).
const nothingTestedDetail = "not judged: nothing was tested"

// acceptedOnly notes the keys whose every success was a 202 Accepted (the
// work taken to be done later), and how many of their orders the provider
// never charged: idemcheck does not follow a status URL, and a key
// answered 202 is settled for the final probes, so whether that work was
// ever done was not judged. An asynchronous service that dropped a third
// of its accepted jobs passed, saying every key got a success.
func acceptedOnly(ok, done map[string]bool, keys keyFacts) (int, []string) {
	n, uncharged := 0, 0
	for k, v := range ok {
		if v && !done[k] {
			n++
			if !keys.ownCharged(k) {
				uncharged++
			}
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, []string{fmt.Sprintf("not judged: %d keys got only 202 Accepted (their work taken to be done later), and the provider never charged the orders of %d of them by the run's end: idemcheck follows no status URL, and a key answered 202 is not probed again, so whether accepted work was done was not judged", n, uncharged)}
}
