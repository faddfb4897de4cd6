package httpcheck

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/idemcheck/idemcheck/harness/history"
)

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
func checkStatus(xs []history.Exchange, charges []history.Charge, fs []history.Fault, keys keyFacts, p Policy) Result {
	charged := map[string]bool{}
	byOrder := map[string][]history.Charge{}
	for _, c := range charges {
		if c.Effective {
			charged[c.Order] = true
			byOrder[c.Order] = append(byOrder[c.Order], c)
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
	counts := map[string]int{}
	var vs []Violation
	var notes []string
	reuse409 := 0
	for _, x := range xs {
		if !x.Answered() {
			continue
		}
		switch {
		case x.Purpose == history.PurposeMissing && !p.KeyOptional:
			counts["missing key"]++
			if x.Status != http.StatusBadRequest {
				vs = append(vs, Violation{Checker: Status, Key: "(none)", Cause: CauseMissing, At: x.Return, Detail: fmt.Sprintf(
					"a request with no idempotency key got %d from %s at %s, not 400 (a service that serves it as a plain request declares --key optional)", x.Status, x.Instance, ms(x.Return))})
			}
		case x.Purpose == history.PurposeLong:
			counts["over-long key"]++
			if x.Status != http.StatusBadRequest {
				vs = append(vs, Violation{Checker: Status, Key: clip(x.Key), Cause: CauseLong, At: x.Return, Detail: fmt.Sprintf(
					"a %d-byte key got %d from %s at %s, not 400 (a service that accepts longer keys declares its limit: --max-key-len N, or 0 for none)", len(x.Key), x.Status, x.Instance, ms(x.Return))})
			}
		case x.Purpose == history.PurposeReuse:
			counts["key reused with another body"]++
			// A reuse that ran as new is a violation only if the service
			// had the key ([keyFacts.had]); otherwise it may be the first
			// request of its key the service saw (every attempt with the
			// key's own body lost on the way, as with --attempts 1
			// through faults), and running it is what the service must do.
			if success(x.Status) && charged[x.Order] && keys.had(x.Key) && lostWithOwner(answers[x.Key], byKey[x.Key], byOrder[keys.ownOrder[x.Key]], fs, x) {
				notes = append(notes, fmt.Sprintf("key %s reused with another body (order %s) ran as new at %s, after idemcheck killed (or paused past its lease) every instance that had charged the key's own order, before any client got a success for it: the service lost the key's unfinished record with its owner, as a retry after a crash runs again; excused",
					x.Key, x.Order, ms(x.Return)))
				continue
			}
			if success(x.Status) && (!charged[x.Order] || keys.had(x.Key)) {
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
			if x.Purpose == history.PurposeReuse && !outstanding(byKey[x.Key], x) {
				// A refusal of the reuse, in another code than the
				// draft's 422 (which it advises, not requires): Brandur
				// Leach's design, and the libraries after it, answer a
				// mismatch 409. Nothing ran.
				reuse409++
				continue
			}
			if !outstanding(byKey[x.Key], x) {
				vs = append(vs, Violation{Checker: Status, Key: x.Key, Cause: Cause409, At: x.Return, Detail: fmt.Sprintf(
					"key %s got 409 from %s at %s while no other request of the key was in flight", x.Key, x.Instance, ms(x.Return))})
			}
		}
	}
	if reuse409 > 0 {
		notes = append(notes, fmt.Sprintf("%d keys reused with another body got 409 while no other request of the key was in flight: refused, so nothing ran, but the draft advises 422 for a mismatch (409 says the key is in flight)", reuse409))
	}
	r := Result{Checker: Status, Applied: len(counts) > 0, Notes: notes}
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

// lostWithOwner reports whether a reuse x that ran as new came after the
// service may have lost its key with the key's owner: no client got a
// success for the key's own body before x was sent (successes), and
// every charge of the key's own order (own) was made by an owner that
// could not hold the key when x came: an instance that idemcheck killed,
// or paused across the provider's answer, after the charge and before x
// was sent; or one paused from before x was sent until just before its
// charge, holding a request of the key (keyed) when the pause began
// ([staleOwner]: its lease ran out while it stood still, so its charge,
// before x or after, was made on a claim the service no longer held). An
// owner that dies between its charge and its save leaves an unfinished
// record that expires with its lease: the key is new again, a retry with
// its own body runs again (at-most-once excuses it, see [killedBetween]),
// and so may a reuse with another body.
func lostWithOwner(successes, keyed []history.Exchange, own []history.Charge, fs []history.Fault, x history.Exchange) bool {
	if len(own) == 0 {
		return false
	}
	for _, s := range successes {
		if completed(s.Status) && s.Return < x.Call {
			return false
		}
	}
	for _, c := range own {
		if killedBetween(fs, c.Via, c.At, x.Call) || pausedAcross(fs, c) {
			continue
		}
		if _, stale := staleOwner(fs, keyed, c, x.Call); stale {
			continue
		}
		return false
	}
	return true
}
