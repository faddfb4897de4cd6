package httpcheck

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// outstanding reports whether the service may still have held x's key
// for another exchange of it when x was answered: one sent before x's
// answer and not over for the service ([heldUntil]) before x was sent,
// or a charge of the key's own order (own, any the provider saw) being
// made then, or answered less than [saveSlack] before x was sent, with
// no completed success of the key since it began: a request the clients
// never sent was at work on the key (a gateway that sent a POST again to
// another instance, nginx's proxy_next_upstream non_idempotent, while
// the first still ran).
func outstanding(same []history.Exchange, own []history.Charge, x history.Exchange) bool {
	for _, c := range own {
		until := history.Never
		if c.End != 0 {
			until = c.End + int64(saveSlack)
		}
		for _, s := range same {
			if keyedOwn(s) && completed(s.Status) && s.Return > c.At && s.Return < until {
				until = s.Return // the key's work was done, and said
			}
		}
		if c.At < x.Return && until > x.Call {
			return true
		}
	}
	for _, o := range same {
		if o.Call == x.Call && o.Client == x.Client {
			continue
		}
		if o.Call < x.Return && heldUntil(same, o) > x.Call {
			return true
		}
	}
	return false
}

// pausedDuring reports whether idemcheck paused x's instance while x was
// at it (the pause began after x was sent and before its answer): an
// owner whose lease ran out while it stood still finds its save fenced,
// which a correct service answers 409 (the claim is another's now).
func pausedDuring(fs []history.Fault, x history.Exchange) bool {
	for _, f := range fs {
		if f.Kind == history.FaultInstancePause && f.Failpoint == x.Instance && f.Start >= x.Call && f.Start <= ends(x) {
			return true
		}
	}
	return false
}

// saveSlack is how long after its charge was answered a request may
// still hold its key to save its answer.
const saveSlack = time.Second

// heldUntil is until when the service may have held o's key for o (same
// is every exchange of the key): o's end ([ends]), or, when o's answer
// does not say its work ended ([mayStillRun]), the first completed
// success of the key answered after it (never, without one). A timeout
// middleware (Go's http.TimeoutHandler, Express's connect-timeout) or a
// gateway answers 503, 504 or 408 while the handler still runs, and a
// service that does not know its work's outcome after an error must keep
// the claim (releasing it is the release-on-error bug) until its own
// lease ends: a 409 meanwhile says the truth. A claim kept for ever is
// the liveness checker's to judge, on the final probes.
func heldUntil(same []history.Exchange, o history.Exchange) int64 {
	end := ends(o)
	if !o.Answered() || !mayStillRun(o.Status) || !keyedOwn(o) {
		return end
	}
	end = history.Never
	for _, s := range same {
		if keyedOwn(s) && completed(s.Status) && s.Return > o.Return && s.Return < end {
			end = s.Return
		}
	}
	return end
}

// refusedOtherwise reports whether status refuses a request in another
// code than the draft's 400, which it advises (SHOULD) but does not
// require: a 4xx that is not 400 and does not ask to try again
// ([history.Final]). FastAPI's validation answers a missing or too long
// header 422, an HTTP server's header limit 431; nothing ran.
func refusedOtherwise(status int) bool {
	return status > 400 && status < 500 && history.Final(status)
}

// checkStatus judges the draft's status codes.
func checkStatus(xs []history.Exchange, charges []history.Charge, fs []history.Fault, keys keyFacts, p Policy) Result {
	charged := map[string]bool{}
	byOrder := map[string][]history.Charge{}
	allByOrder := map[string][]history.Charge{} // repeats of a downstream key too
	for _, c := range charges {
		allByOrder[c.Order] = append(allByOrder[c.Order], c)
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
	// Copies no client saw made some charge of the run: the deployment
	// resends requests (a gateway), and any key may have had one.
	copies := false
	for k, order := range keys.ownOrder {
		for _, c := range byOrder[order] {
			copies = copies || unseenCharge(byKey[k], c)
		}
	}
	counts := map[string]int{}
	var vs []Violation
	var notes []string
	reuse409, unread, releasedRan, pausedOwn, unseen := 0, 0, 0, 0, 0
	reuseOther := map[int]int{}       // reuses refused in another 4xx than 422 (409 apart), by code
	optional, optionalRefused := 0, 0 // requests without a key under --key optional, answered; refused
	otherRefusal := map[int]int{}     // missing or over-long keys refused in another code than 400, by code
	for _, x := range xs {
		if !x.Answered() {
			continue
		}
		switch {
		case (x.Purpose == history.PurposeMissing && !p.KeyOptional || x.Purpose == history.PurposeLong) && history.TryAgain(x.Status):
			// A limiter, a timeout or a gateway answered before the key
			// was read: nothing to judge.
			unread++
		case x.Purpose == history.PurposeMissing && !p.KeyOptional:
			counts["missing key"]++
			if refusedOtherwise(x.Status) {
				otherRefusal[x.Status]++
			} else if x.Status != http.StatusBadRequest {
				vs = append(vs, Violation{Checker: Status, Key: "(none)", Cause: CauseMissing, At: x.Return, Detail: fmt.Sprintf(
					"a request with no idempotency key got %d from %s at %s, not 400 (a service that serves it as a plain request declares --key optional)", x.Status, x.Instance, ms(x.Return))})
			}
		case x.Purpose == history.PurposeLong:
			counts["over-long key"]++
			if refusedOtherwise(x.Status) {
				otherRefusal[x.Status]++
			} else if x.Status != http.StatusBadRequest {
				vs = append(vs, Violation{Checker: Status, Key: clip(x.Key), Cause: CauseLong, At: x.Return, Detail: fmt.Sprintf(
					"a %d-byte key got %d from %s at %s, not 400 (a service that accepts longer keys declares its limit: --max-key-len N, or 0 for none)", len(x.Key), x.Status, x.Instance, ms(x.Return))})
			}
		case x.Purpose == history.PurposeNoKey || x.Purpose == history.PurposeMissing:
			// --key optional (the load sends these as
			// [history.PurposeNoKey]): served as a plain request. Refused as one
			// with no key is what a service that requires keys does:
			// the declaration is then wrong, and its 400s go unjudged.
			optional++
			if x.Status == http.StatusBadRequest || refusedOtherwise(x.Status) {
				optionalRefused++
			}
		case x.Purpose == history.PurposeReuse:
			counts["key reused with another body"]++
			// A reuse that ran as new is a violation only if the service
			// had the key ([keyFacts.had]); otherwise it may be the first
			// request of its key the service saw (every attempt with the
			// key's own body lost on the way, as with --attempts 1
			// through faults), and running it is what the service must do.
			if success(x.Status) && charged[x.Order] && keys.had(x.Key) && lostWithOwner(answers[x.Key], byKey[x.Key], byOrder[keys.ownOrder[x.Key]], fs, x, p.InFlightTTL) {
				notes = append(notes, fmt.Sprintf("key %s reused with another body (order %s) ran as new at %s, after idemcheck killed (or paused past its lease) every instance that had charged the key's own order, before any client got a success for it: the service lost the key's unfinished record with its owner, as a retry after a crash runs again; excused",
					x.Key, x.Order, ms(x.Return)))
				continue
			}
			// Only a key the service had can it have released: one whose
			// every request a limiter refused was new to it, and running
			// the reuse was right (the note blamed a release on error).
			if success(x.Status) && charged[x.Order] && keys.had(x.Key) && !p.SavesErrors && releasedOnError(byKey[x.Key], allByOrder[keys.ownOrder[x.Key]], x) {
				releasedRan++
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
			if x.Status == http.StatusBadRequest || x.Status != http.StatusUnprocessableEntity && refusedOtherwise(x.Status) {
				reuseOther[x.Status]++ // refused, nothing ran; a 400 passed with nothing said
			}
		}
		if x.Status == http.StatusConflict && x.HasKey {
			counts["409"]++
			if outstanding(byKey[x.Key], allByOrder[keys.ownOrder[x.Key]], x) {
				continue // another request of the key was in flight: the 409 is right
			}
			switch {
			case x.Purpose == history.PurposeReuse:
				// A refusal of the reuse, in another code than the
				// draft's 422 (which it advises, not requires): Brandur
				// Leach's design, and the libraries after it, answer a
				// mismatch 409. Nothing ran.
				reuse409++
			case pausedDuring(fs, x):
				pausedOwn++
			case unseenHolder(byKey[x.Key], byOrder[keys.ownOrder[x.Key]], x, copies):
				unseen++
			default:
				vs = append(vs, Violation{Checker: Status, Key: x.Key, Cause: Cause409, At: x.Return, Detail: fmt.Sprintf(
					"key %s got 409 from %s at %s while no other request of the key was in flight", x.Key, x.Instance, ms(x.Return))})
			}
		}
	}
	if releasedRan > 0 {
		notes = append(notes, fmt.Sprintf("%d keys reused with another body ran as new after every request of the key's own body had ended, the last in a 5xx given once the provider had answered its charges: a service that releases its claim on an error (docs/spec.md) no longer has the key, and runs a request for it as new; excused (declare --saves-errors if the service saves its errors: a reuse must then get 422)", releasedRan))
	}
	if pausedOwn > 0 {
		notes = append(notes, fmt.Sprintf("%d requests got 409 with no other request of their key in flight from an instance idemcheck paused while they were at it: its claim could run out while it stood still, and the save it was fenced from answers 409 (docs/spec.md); excused", pausedOwn))
	}
	if unseen > 0 {
		notes = append(notes, fmt.Sprintf("%d requests got 409 with no request of their key in flight that a client sent, before the provider charged the key's order, in a run where the provider made charges no client request was open to make: a copy of a request that no client saw held the key (a gateway resending the POST to another instance, as nginx's proxy_next_upstream non_idempotent does; work the service runs on after answering); excused", unseen))
	}
	if len(reuseOther) > 0 {
		n, codes := 0, []string{}
		for c, k := range reuseOther {
			n += k
			codes = append(codes, strconv.Itoa(c))
		}
		slices.Sort(codes)
		notes = append(notes, fmt.Sprintf("%d keys reused with another body were refused with %s: refused, so nothing ran, but the draft advises 422 for a mismatch", n, strings.Join(codes, ", ")))
	}
	if reuse409 > 0 {
		notes = append(notes, fmt.Sprintf("%d keys reused with another body got 409 while no other request of the key was in flight: refused, so nothing ran, but the draft advises 422 for a mismatch (409 says the key is in flight)", reuse409))
	}
	if optionalRefused > 0 {
		notes = append(notes, fmt.Sprintf("declared --key optional, but %d of the %d answered requests without a key were refused (400 or another 4xx): the service seems to require a key; declare it (--key required, the default) to have its answers to them judged", optionalRefused, optional))
	}
	if len(otherRefusal) > 0 {
		var codes []string
		n := 0
		for _, c := range slices.Sorted(maps.Keys(otherRefusal)) {
			codes = append(codes, fmt.Sprintf("%d × %d", otherRefusal[c], c))
			n += otherRefusal[c]
		}
		notes = append(notes, fmt.Sprintf("%d request(s) with a missing or over-long key were refused with another 4xx than 400 (%s): refused, so nothing ran, but the draft advises 400", n, strings.Join(codes, ", ")))
	}
	if unread > 0 {
		notes = append(notes, fmt.Sprintf("not judged: %d request(s) with a missing or over-long key got %s before the key was read", unread, tryAgainCodes))
	}
	r := Result{Checker: Status, Applied: len(counts) > 0, Notes: notes}
	var parts, none []string
	for _, k := range []string{"missing key", "over-long key", "key reused with another body", "409"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		} else {
			none = append(none, k)
		}
	}
	r.Detail = "judged " + strings.Join(parts, ", ")
	if len(none) > 0 {
		// A pass said what it judged and not what it did not (a slow
		// provider left no reuse and no over-long key answered).
		r.Detail += "; none answered, so not judged: " + strings.Join(none, ", ")
	}
	if !r.Applied {
		r.Detail = "no answer to a missing, over-long or reused key, and no 409"
	}
	if counts["key reused with another body"] > 0 {
		// The reuses judged read as every fingerprint tested: a service
		// fingerprinting the order alone passed with nothing said. A
		// reuse always sends another order, since the provider's ledger
		// counts charges by order (docs/blackbox.md).
		r.Detail += "; not tested: a fingerprint of the order alone (a reuse never sends the key's order with another amount)"
	}
	return finish(r, vs)
}

// releasedOnError reports whether a reuse x that ran as new came when a
// correct service may have released the key on an error, as the
// decision table allows (docs/spec.md: on error, release the claim or
// save the error): every request of the key's own body (keyed) sent
// before x ended before it, none with a completed success, the
// last answered with a 5xx (the others unanswered: lost on the way),
// and every charge of the key's own order (own, repeats of its
// downstream key included) was made and answered by the provider before
// that 5xx, so the 5xx is the handler's own outcome, not a timeout's or
// a gateway's while the handler still held the key, and no retry since
// reached the work.
func releasedOnError(keyed []history.Exchange, own []history.Charge, x history.Exchange) bool {
	var last history.Exchange
	for _, o := range keyed {
		if !keyedOwn(o) || o.Call >= x.Call {
			continue
		}
		if o.Answered() && completed(o.Status) || ends(o) > x.Call {
			return false
		}
		if o.Answered() && o.Return > last.Return {
			last = o
		}
	}
	if !last.Answered() || last.Status < 500 {
		return false
	}
	// A retry left unanswered (a reset connection) that reached the
	// service would have charged again, or met the provider's answer
	// for the downstream key: the charges, repeats included, all ended
	// before the 5xx.
	for _, c := range own {
		if c.End == 0 || c.End > last.Return || c.At > last.Return {
			return false
		}
	}
	return true
}

// lostWithOwner reports whether a reuse x that ran as new came after the
// service may have lost its key with the key's owner: no client got a
// success for the key's own body before x was sent (successes), and
// every charge of the key's own order (own) was made by an owner that
// could not hold the key when x came: an instance that idemcheck killed,
// or paused across the provider's answer, after the charge and before x
// was sent; or one paused from before x was sent until just before its
// charge, holding a request of the key (keyed) when the pause began
// ([staleOwnerLease]: its lease ran out while it stood still, so its charge,
// before x or after, was made on a claim the service no longer held). An
// owner that dies between its charge and its save leaves an unfinished
// record that expires with its lease: the key is new again, a retry with
// its own body runs again (at-most-once excuses it, see [killedBetween]),
// and so may a reuse with another body. Under a declared lease (ttl) a
// pause counts only if the lease can have run out in it
// ([pausedPastLease], [staleOwnerLease]).
func lostWithOwner(successes, keyed []history.Exchange, own []history.Charge, fs []history.Fault, x history.Exchange, ttl time.Duration) bool {
	if len(own) == 0 {
		return false
	}
	for _, s := range successes {
		if completed(s.Status) && s.Return < x.Call {
			return false
		}
	}
	for _, c := range own {
		// x stands for the second charge: the pause must have begun
		// before it was sent.
		if killedBetween(fs, c.Via, c.At, x.Call) || pausedPastLease(fs, keyed, c, history.Charge{At: x.Call}, ttl) {
			continue
		}
		if _, stale := staleOwnerLease(fs, keyed, c, x.Call, ttl, x.Call); stale {
			continue
		}
		return false
	}
	return true
}

// unseenCharge reports whether no client request of the key (same)
// that could have made the charge c was open when the provider counted
// it (one answered a 4xx, a 409 among them, ran nothing): something no
// client saw ran the key's work (a gateway's copy of a request, which
// nginx's proxy_next_upstream non_idempotent sends to another instance
// after a timeout; work the service goes on with after it answered).
func unseenCharge(same []history.Exchange, c history.Charge) bool {
	for _, s := range same {
		refused := s.Answered() && s.Status >= 400 && s.Status < 500 // 409 and the like: it ran nothing
		if keyedOwn(s) && !refused && s.Call <= c.At && ends(s) >= c.At {
			return false
		}
	}
	return true
}

// unseenHolder reports whether a copy no client saw may have held x's
// key when x got 409: a charge of the key's own order (own, the
// effective ones) came after x was sent, and either no client request
// could have made it ([unseenCharge]), or the run holds such charges
// elsewhere (copies, found, may hold any key), for this charge's maker
// may be a copy too while a client request was open beside it. A copy
// still in the work before its charge (a fraud check) was blamed on the
// service as a 409 with nothing in flight.
func unseenHolder(same []history.Exchange, own []history.Charge, x history.Exchange, found bool) bool {
	for _, c := range own {
		if c.At > x.Call && (found || unseenCharge(same, c)) {
			return true
		}
	}
	return false
}
