package httpcheck

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// checkLiveness reads the final probes: each key probed after every fault
// healed must have got a definite answer ([history.Final]), or the same
// 5xx for an order whose charge went through while the service may lack
// its outcome (a saved error, replayed). A key still refused with 409,
// 423 or 429, answered a 5xx the ledger does not explain, or not
// answered while the service answered most other calls beside its
// probes, is stuck; one held ([held]) after its owner died or gave up,
// with no in-flight TTL declared, is not judged ([orphans]), nor one held while
// its order's charge was still being made ([stillCharging]), nor one not
// answered while the service answered few others ([history.Ends]).
func checkLiveness(xs []history.Exchange, charges []history.Charge, fs []history.Fault, keys keyFacts, p Policy) Result {
	// Each key's answers to its own body, in call order: the answer
	// before its last probe, whatever sent it (the probes may have had
	// time for one attempt only), says whether that probe's 5xx was
	// replayed.
	answeredOwn := map[string][]history.Exchange{}
	for _, x := range xs {
		if keyedOwn(x) && x.Answered() {
			answeredOwn[x.Key] = append(answeredOwn[x.Key], x)
		}
	}
	before := func(x history.Exchange) history.Exchange {
		var p history.Exchange
		for _, o := range answeredOwn[x.Key] {
			if o.Call < x.Call {
				p = o
			}
		}
		return p
	}
	var order []string
	probed := map[string]*keyProbes{}
	for _, x := range xs {
		if x.Purpose != history.PurposeProbe {
			continue
		}
		kp := probed[x.Key]
		if kp == nil {
			kp = &keyProbes{first: x.Call}
			probed[x.Key] = kp
			order = append(order, x.Key)
		}
		kp.prev, kp.last = kp.last, x
		kp.silence.Add(x.Answered(), x.Call)
		kp.refused.Add(!x.Answered() || !history.TryAgain(x.Status), x.Call)
	}
	var ends, refusals, fresh history.Ends
	var freshXs []history.Exchange // the fresh keys' exchanges
	if slices.ContainsFunc(order, func(k string) bool { return probed[k].silence.N > 0 }) {
		ends = exchangeEnds(xs)
	}
	if slices.ContainsFunc(order, func(k string) bool { return probed[k].refused.N > 0 }) {
		refusals = refusalEnds(xs)
		freshXs = slices.DeleteFunc(slices.Clone(xs), func(x history.Exchange) bool { return x.Purpose != history.PurposeFresh })
		fresh = refusalEnds(freshXs)
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
	failedByProvider := map[string]bool{}     // of errored: the provider's own failure, not a hang-up
	charging := map[string][]history.Charge{} // each order's charges, by order
	for _, c := range charges {
		charging[c.Order] = append(charging[c.Order], c)
		if c.Effective && c.Errored() {
			errored[c.Order] = true
			failedByProvider[c.Order] = failedByProvider[c.Order] || c.Outcome == history.OutcomeFailed
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
		Detail: fmt.Sprintf("%d keys whose last answer in the load was not definite (a 409, a 5xx, none: faults, races, timeouts) all got a definite answer in the final probes (%d instance kills, pauses or exits)", len(order), crashes)}
	if !r.Applied {
		r.Detail = "every key was settled before the end: nothing to probe"
	}
	orphaned, byID := orphans(xs, fs, charging), chargesByID(charges)
	saved, hungUp, lostAnswer, reran, declared := 0, 0, 0, 0, 0
	var unjudged, early, savedErrs, silentKeys, working, refusedKeys, keyRefused, briefKeys, onceKeys []string
	earlyFirst := ""       // the first key held within the TTL of its owner's death
	unjudgedFirst := ""    // the first key held after its owner left, no TTL declared
	unanswerFirst := ""    // the first unanswered key, its probes and its last error
	refusedFirst := ""     // the first key refused beside the others, and its refusals
	var askedWait []string // keys whose refusals asked waits no probe honoured
	var vs []Violation
	for _, k := range order {
		kp := probed[k]
		x := kp.last
		if history.Final(x.Status) {
			continue
		}
		// A limiter, a timeout or a gateway answers [history.TryAgain]
		// without the key: it is the key's only if the service answered
		// most of the other calls that ended meanwhile (as with no
		// answer), or, for a key whose owner may have left its claim
		// behind ([orphans]), the fresh keys sent beside its probes
		// ([history.PurposeFresh]: the other calls then may be the
		// probes of other stuck keys, refused alike). Any other key
		// refused while fresh keys got through may be refused by a
		// limiter that goes by the key (its Retry-After longer than the
		// probes honour), and stays unjudged, saying so.
		refusal := "" // set when the key was refused beside the others
		freshBeside := ""
		othersRefused, brief, gateway := false, false, false
		if x.Answered() && history.TryAgain(x.Status) {
			ok, failed, answering := refusals.Beside(kp.refused.From, x.Return, kp.refused.N)
			fok, ffailed, got := fresh.Apart(kp.refused.From, x.Return, kp.refused.N)
			// Fresh keys answered the very same page beside the key's
			// 5xx: a gateway answering every call (nginx's 502 page),
			// not the key's saved error, which a key charged but never
			// answered was taken for (a fresh key's own saved error
			// names its own order).
			gateway = x.Status >= 500 && alike(freshXs, kp.first, x)
			if !answering && got {
				freshBeside = fmt.Sprintf(", while the service answered %d of %d fresh keys sent beside its probes", fok, fok+ffailed)
				// A limiter that goes by the key may refuse it (429,
				// 503); no limiter answers a gateway's 502 or 504, and
				// the gateway answered the fresh keys.
				_, answering = orphaned[k]
				answering = answering || gatewayStatus(x) && !gateway
			}
			if !answering {
				refusal = fmt.Sprintf("%s, its last %d probes answered %d, while %d of %d other calls got another answer%s", k, kp.refused.N, x.Status, ok, ok+failed, freshBeside)
				othersRefused = failed > 0 && freshBeside == ""
			} else {
				// Refused for less than it takes to tell a refusal
				// that lasts: the probes ran out of time.
				brief = x.Return-kp.refused.From < int64(history.RefusalLasts)
			}
		}
		refuse := func() {
			if freshBeside != "" {
				keyRefused = append(keyRefused, refusal)
				return
			}
			if len(refusedKeys) == 0 {
				refusedFirst = refusal
			}
			refusedKeys = append(refusedKeys, k)
		}
		if gateway {
			refusal = fmt.Sprintf("%s, its last %d probes answered %d, as did every fresh key sent beside them", k, kp.refused.N, x.Status)
			refuse()
			continue
		}
		// A 5xx asking for a later try is no saved error, unless the
		// service declared that it saves its errors (a middleware that
		// saves the whole answer replays its Retry-After too).
		later := asksLater(x) && !p.SavesErrors
		if x.Status >= 500 && errored[x.Order] && !later {
			saved++
			if !failedByProvider[x.Order] {
				hungUp++
			}
			continue
		}
		if x.Status >= 500 && unanswered[x.Order] && !keys.succeeded[k] && !later {
			lostAnswer++
			if rerun(charging[x.Order]) {
				reran++
			}
			continue
		}
		// Asked before a 5xx that no charge explains is taken for a
		// saved error when others were refused beside the key too: a
		// gateway refusing every call (nginx, until its failed
		// upstreams' fail_timeout passes) answers each probe the same
		// page, which is no answer of the service's.
		if othersRefused {
			refuse()
			continue
		}
		ranWork := chargedWithin(charging[x.Order], x)
		if x.Status >= 500 && replayed(before(x), x) && !keys.succeeded[k] && !later && !ranWork {
			// The same 5xx as the key's answer before, no client ever
			// got a success for it, and no charge of its order explains
			// it: a service that saves every error (Stripe does) answers
			// so, and so does one stuck on the key.
			if p.SavesErrors {
				declared++
			} else {
				savedErrs = append(savedErrs, k)
			}
			continue
		}
		// Refused, each time, sooner than the answer before asked
		// (Retry-After): a limiter that goes by the key refuses every
		// retry sent sooner (nginx, limit_req by the Idempotency-Key,
		// 60 s), and a correct service behind it failed liveness on
		// refusals it never made.
		if x.Answered() && history.TryAgain(x.Status) {
			if wait, honoured := honouredWait(answeredOwn[k], kp.refused.From); wait > 0 && !honoured {
				askedWait = append(askedWait, fmt.Sprintf("%s, asked to wait %v (Retry-After) by an answer its next probe came sooner than", k, wait.Round(time.Millisecond)))
				continue
			}
		}
		if refusal != "" {
			refuse()
			continue
		}
		if brief {
			briefKeys = append(briefKeys, k)
			continue
		}
		// No answer says nothing of the key unless the service answered
		// most of the other calls that ended while the key's last probes
		// went unanswered (see [history.Ends]).
		okBeside, failedBeside, answering := 0, 0, true
		if !x.Answered() {
			okBeside, failedBeside, answering = ends.Beside(kp.silence.From, max(x.ErrAt, x.Call), kp.silence.N)
		}
		// A key so starved is the silent case below, whatever its owner
		// did: declaring a TTL would not judge it (a starved service's
		// undecided run asked for one, and asked again).
		if o, ok := orphaned[k]; ok && held(x) && (o.death || answering) {
			died := o.at
			switch {
			case p.InFlightTTL == 0:
				if len(unjudged) == 0 {
					unjudgedFirst = fmt.Sprintf("%s: %s", k, o.how)
				}
				unjudged = append(unjudged, k)
				continue
			case x.Call < died+int64(p.InFlightTTL+ttlSlack):
				// Held while the declared TTL had not run out since its
				// owner died (a recheck declaring a TTL longer than the
				// run's probes lasted): not yet the service's to release.
				if len(early) == 0 {
					earlyFirst = fmt.Sprintf("%s, last probed %v after %s", k, time.Duration(x.Call-died).Round(time.Millisecond), o.how)
				}
				early = append(early, k)
				continue
			}
		}
		if held(x) && stillCharging(charging[x.Order], kp.prev, x) {
			working = append(working, k)
			continue
		}
		cause, got := CauseNoAnswer, "no answer ("+x.Err+")"
		if !x.Answered() {
			if !answering {
				if len(silentKeys) == 0 {
					unanswerFirst = fmt.Sprintf("%s, %d probes, the last: %s", k, x.Attempt, x.Err)
				}
				silentKeys = append(silentKeys, k)
				continue
			}
			if kp.silence.N < 2 {
				// One probe unanswered, when --settle ran out (many
				// keys to probe, each its turn): one lost answer, the
				// others' all in, is a slow moment as often as a stuck
				// key.
				onceKeys = append(onceKeys, k)
				continue
			}
			got = fmt.Sprintf("no answer (%s), while the service answered %d of %d other calls meanwhile", x.Err, okBeside, okBeside+failedBeside)
		}
		switch {
		case x.Status == http.StatusConflict:
			cause, got = CauseInFlight, "409 (still in flight)"
		case x.Status == http.StatusLocked:
			cause, got = CauseLocked, "423 (still locked)"
		case asksLater(x):
			cause, got = CauseThrottled, fmt.Sprintf("%d %q asking to try again in %v (Retry-After; a service that saves its errors, Retry-After and all, declares it: --saves-errors)", x.Status, clip(x.Reply), time.Duration(x.RetryAfter).Round(time.Millisecond))
		case x.Status >= 500 && keys.succeeded[k]:
			cause, got = CauseServerError, fmt.Sprintf("%d %q, though a client got the key's success before: its saved answer lost or replaced", x.Status, clip(x.Reply))
		case x.Status >= 500 && ranWork:
			cause, got = CauseServerError, fmt.Sprintf("%d %q, %s", x.Status, clip(x.Reply), ranAgain(charging[x.Order], byID, x))
		case x.Status >= 500:
			cause, got = CauseServerError, fmt.Sprintf("%d %q, and the provider failed no charge of its order %s", x.Status, clip(x.Reply), x.Order)
		case x.Answered():
			cause, got = CauseThrottled, fmt.Sprintf("%d (try again later)", x.Status)
		}
		got += freshBeside
		span := time.Duration(x.Call - kp.first).Round(time.Millisecond)
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
		// A charge the service hung up on (its own deadline passed first)
		// is no failure of the provider's: said apart (with
		// --provider-latency past the service's deadline, every one was
		// said to be the provider's).
		how := "the provider failed"
		switch {
		case hungUp == saved:
			how = "the service hung up on before the provider answered (its own deadline passed first)"
		case hungUp > 0:
			how = fmt.Sprintf("the provider failed or, for %d of them, the service hung up on before the provider answered", hungUp)
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%d keys answer a 5xx for a charge %s: a saved error, replayed (the charge went through, so it is never run again)", saved, how))
	}
	if lostAnswer > reran {
		r.Notes = append(r.Notes, fmt.Sprintf("%d keys answer a 5xx for a charge the provider made and answered, though no client ever got a success for them: taken for a saved error, replayed (the service did not get the charge id: its deadline passed as the answer came), which a service still failing that key at the end of the probes (a busy store) answers alike; the charge went through, so it is never run again", lostAnswer-reran))
	}
	if reran > 0 {
		// Not a saved error: each request ran the work again, and only
		// the provider's key kept the order charged once (a save that
		// always fails, the claim released on the error).
		r.Notes = append(r.Notes, fmt.Sprintf("%d keys answer a 5xx though the provider charged their order, and their requests called the provider again with the same downstream key (no effect): the service ran their work again on every request and saved no answer (a save that fails, its claim released on the error); at-most-once held by the provider's key alone", reran))
	}
	if declared > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d keys replay a 5xx the provider does not explain (it never charged their orders): the service declared that it saves its errors (--saves-errors), so a replayed 5xx is their answer", declared))
	}
	var why []string
	if len(unjudged) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) were still held at the end of the probes (409, 423, 425, 429, 408, or a request kept waiting past --timeout), each after its owner may have left its claim behind (an instance died while a request of the key was there, or a request of it got a 202, 408 or 5xx, or no answer, and the key never got a success): a correct service holds such a key until its in-flight TTL, which was not declared; declare it (--inflight-ttl D on the next run, whose final probes then last that long; idemcheck recheck --inflight-ttl D on this run's directory judges only the keys its probes followed D past that moment) to judge them", len(unjudged), unjudgedFirst))
	}
	if len(early) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) were still held at their last probe, less than the declared in-flight TTL (%v, and %v for the clocks) after their owner may have left its claim behind: the probes ended before a correct service had to release them (run again with --inflight-ttl %v if the run declared less: its final probes then last that long; if it declared that much, its probes were slowed, each waiting up to --timeout on a starved machine or service, and a longer --settle gives them the time)", len(early), earlyFirst, p.InFlightTTL, ttlSlack, p.InFlightTTL))
	}
	if len(savedErrs) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) replay one 5xx (the last probe's answer and the one before it), for an order the provider never charged: a service that saves every error answers so (declare it with --saves-errors, or idemcheck recheck --saves-errors on this run's directory), and so does one stuck on the key", len(savedErrs), savedErrs[0]))
	}
	if len(silentKeys) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) got no answer to their last probes while the service answered few or none of the other calls beside them: no answer says nothing of a key when the service answers no one (stopped, starved by the machine, cut off)", len(silentKeys), unanswerFirst))
	}
	if len(working) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) were still held at the end of the probes while the provider was still making their order's charge, or was asked for it again: their owner was still at work, which a correct service holds the key for; give the probes longer than the work takes (--settle) to judge them", len(working), working[0]))
	}
	if len(refusedKeys) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) got %s to their last probes while the service refused so many of the other calls beside them that as many refusals in a row are to be expected of any key: a limiter or an overload answers so, which says nothing of a key", len(refusedKeys), refusedFirst, tryAgainCodes))
	}
	if len(askedWait) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) were refused only when asked sooner than an answer's Retry-After allowed (the load's clients honour it up to a cap, and a wait past the end of the final probes is never honoured): a limiter that goes by the key refuses every retry sent sooner, so the refusals say nothing of the key; a longer --settle lets the probes wait it out", len(askedWait), askedWait[0]))
	}
	if len(keyRefused) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) got %s to their last probes while fresh keys sent beside them were answered, so the refusals were the key's own: a claim still held, or a limiter that goes by the key and asks a wait longer than the probes honour; no owner of theirs is known to have left its claim behind, so no in-flight TTL says when it must end, and they are not judged", len(keyRefused), keyRefused[0], tryAgainCodes))
	}
	if len(briefKeys) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) got %s to their last probes for less than the %v it takes to tell a refusal that lasts, when --settle ran out: a limiter or a busy service refuses a moment, and the next try gets through; give the probes longer (--settle) to judge them", len(briefKeys), briefKeys[0], tryAgainCodes, history.RefusalLasts))
	}
	if len(onceKeys) > 0 {
		why = append(why, fmt.Sprintf("%d keys (first %s) got no answer to their one probe since their last answer, when --settle ran out: one lost answer is a slow moment as often as a stuck key; give the probes longer (--settle) to judge them", len(onceKeys), onceKeys[0]))
	}
	if n := len(unjudged) + len(early) + len(savedErrs) + len(silentKeys) + len(working) + len(refusedKeys) + len(keyRefused) + len(askedWait) + len(briefKeys) + len(onceKeys); n > 0 {
		r.Detail = fmt.Sprintf("%d of %d keys whose last answer in the load was not definite got a definite answer in the final probes (%d instance kills, pauses or exits)", len(order)-n, len(order), crashes)
		r.Unjudged = strings.Join(why, "; ")
	}
	return finish(r, vs)
}

// keyProbes is what the final probes of one key came to: when the first
// was sent, the last two, and the unanswered ones since its last answer.
type keyProbes struct {
	first      int64
	prev, last history.Exchange
	silence    history.Silence
	refused    history.Silence // the run of its last probes answered [history.TryAgain]
}

// stillCharging reports whether one of the charges of the order of a
// key's last probe last was still being made when that probe, or the
// probe before it (prev), was sent, or a repeat of its downstream key
// came in between: the request that owns the key was still at work at
// the end of the probes (a charge slower than --settle, or one the
// service began late), and a correct service holds the key until it is
// done. The probe before counts too: a service saves its outcome a
// moment after its charge is answered.
func stillCharging(cs []history.Charge, prev, last history.Exchange) bool {
	since := last.Call
	if prev.Call != 0 {
		since = prev.Call
	}
	for _, c := range cs {
		if c.Effective && c.At <= last.Call && (c.End == 0 || c.End >= since) {
			return true
		}
		// A repeat of a downstream key (no effect, answered at once) sent
		// since: its owner was at work then.
		if !c.Effective && c.At >= since && c.At <= last.Call {
			return true
		}
	}
	return false
}

// exchangeEnds is when each exchange ended: an answered one's return, an
// unanswered one's error (or its call where no error time was recorded).
func exchangeEnds(xs []history.Exchange) history.Ends {
	var answered, unanswered []int64
	for _, x := range xs {
		if x.Answered() {
			answered = append(answered, x.Return)
		} else {
			unanswered = append(unanswered, max(x.ErrAt, x.Call))
		}
	}
	return history.NewEnds(answered, unanswered)
}

// refusalEnds is when each answered exchange ended, as [history.Ends]
// takes them for refusals: answered ([history.TryAgain]: a limiter, a
// timeout or a gateway refused it), or not.
func refusalEnds(xs []history.Exchange) history.Ends {
	var answered, refused []int64
	for _, x := range xs {
		switch {
		case !x.Answered():
		case history.TryAgain(x.Status):
			refused = append(refused, x.Return)
		default:
			answered = append(answered, x.Return)
		}
	}
	return history.NewEnds(answered, refused)
}

// replayed reports whether a key's last probe got the same answer,
// status and body, as its answer before: a saved answer, replayed.
func replayed(prev, last history.Exchange) bool {
	return prev.Answered() && prev.Status == last.Status && prev.Reply == last.Reply
}

// held reports whether a probe's answer says its key is held by another
// request: a status asking to try again later (409, 423, 425, 429, 408:
// services answer an in-flight key with any of them), or no answer within
// the client's timeout (a service that makes a duplicate wait for the
// first request, and a first that died, waits until its lock expires), or
// a 5xx asking to be tried later ([asksLater]). A refused or reset
// connection, or any other 5xx, says nothing of the key.
func held(x history.Exchange) bool {
	if !x.Answered() {
		return x.Err == "timeout"
	}
	return !history.Final(x.Status) && (x.Status < 500 || asksLater(x))
}

// rerun reports whether an order's charges show its work run again after
// it was charged: a later call to the provider that the order's own
// downstream key made of no effect.
func rerun(cs []history.Charge) bool {
	charged := false
	for _, c := range cs {
		if charged && !c.Effective {
			return true
		}
		charged = charged || c.Effective
	}
	return false
}

// ttlSlack is what a declared in-flight TTL is given beyond itself before
// a key held past it is stuck: the service reads its lock's age on its own
// clock, after the request that found it arrived.
const ttlSlack = time.Second

// orphan is when a key's owner may have left its claim behind, and how.
type orphan struct {
	at    int64
	how   string // "an instance died while one of its requests was there", ...
	death bool   // an instance died: no request of the key answered since tells more
}

// orphans names the keys that may have been left in flight by an owner
// that is gone, each with the last such moment: a request of the key was
// at an instance (sent, not yet answered) when idemcheck killed it or it
// exited by itself; or a request of the key was answered in a way that
// does not say its work ended ([mayStillRun]: 202, 408, a 5xx), or went
// unanswered in the load (the client gave up at --timeout), of a key
// that never got a completed success. A correct service keeps
// such a key in flight until its own TTL runs out after that moment,
// which only the service knows: one whose save failed after its charge
// went through does not know its work's outcome, and must keep the claim
// (the status-codes checker's [heldUntil] says the same of the 409s
// meanwhile); a Node service that kept it after a busy SQLite refused its
// save was failed here though it released the key at its 30 s lease.
//
// A probe answered a 5xx asking for a later try ([asksLater]) with no
// charge of its order begun while it was open did no work: a refusal,
// not a new owner (a key stuck for ever and answered 503 with a
// Retry-After was never past its TTL, each probe taken for an owner).
func orphans(xs []history.Exchange, fs []history.Fault, charging map[string][]history.Charge) map[string]orphan {
	deaths := map[string][]int64{}
	for _, f := range fs {
		if f.Kind == history.FaultInstanceKill || f.Kind == history.FaultInstanceExit {
			deaths[f.Failpoint] = append(deaths[f.Failpoint], f.Start)
		}
	}
	out := map[string]orphan{}
	note := func(key string, at int64, how string, death bool) {
		if last, ok := out[key]; !ok || at > last.at {
			out[key] = orphan{at, how, death}
		}
	}
	// The keys that ever got a completed success: done, their answer
	// saved, so no request of theirs left a claim behind (one before
	// the success was finished by it; one after met a done key).
	done := map[string]bool{}
	for _, x := range xs {
		if keyedOwn(x) && x.Answered() && completed(x.Status) {
			done[x.Key] = true
		}
	}
	for _, x := range xs {
		if !x.HasKey {
			continue
		}
		if x.Purpose != history.PurposeProbe {
			for _, at := range deaths[x.Instance] {
				if x.Call <= at && (!x.Answered() || x.Return >= at) {
					note(x.Key, at, "an instance died while one of its requests was there", true)
				}
			}
		}
		if !keyedOwn(x) || done[x.Key] {
			continue
		}
		switch {
		case x.Purpose == history.PurposeProbe && asksLater(x) && !chargedWithin(charging[x.Order], x):
		case x.Answered() && mayStillRun(x.Status):
			note(x.Key, x.Return, fmt.Sprintf("a request of it was answered %d, which does not say its work ended", x.Status), false)
		case !x.Answered() && x.Purpose != history.PurposeProbe && x.Err != "connection refused":
			// Not a probe's: a key whose final probes go unanswered
			// is the stuck key the probes are there to find; nor a
			// refused connection's, which never reached the service.
			note(x.Key, max(x.ErrAt, x.Call), "a request of it went unanswered ("+x.Err+")", false)
		}
	}
	return out
}

// honouredWait looks at the key's answered requests (own, in any order)
// from the refusals' start on: wait is the longest Retry-After an answer
// before a refused one asked (0: none asked), and honoured whether some
// refused request was sent once the wait its answer before asked was
// over (a request whose answer before asked none honours it).
func honouredWait(own []history.Exchange, from int64) (wait time.Duration, honoured bool) {
	xs := slices.Clone(own)
	slices.SortFunc(xs, func(a, b history.Exchange) int { return cmp.Compare(a.Call, b.Call) })
	for i := 1; i < len(xs); i++ {
		x, before := xs[i], xs[i-1]
		if x.Call < from || !history.TryAgain(x.Status) {
			continue
		}
		if before.RetryAfter <= 0 || x.Call >= before.Return+before.RetryAfter {
			honoured = true
		} else {
			wait = max(wait, time.Duration(before.RetryAfter))
		}
	}
	return wait, honoured
}

// alike reports whether at least two of the fresh keys' exchanges (fxs)
// answered from from (the key's first probe: a key's refusals in a row
// last about a second, a fresh key goes once a second) to x's answer,
// and every one of them got x's very status and body: one page for
// every call, a gateway's.
func alike(fxs []history.Exchange, from int64, x history.Exchange) bool {
	n := 0
	for _, f := range fxs {
		if !f.Answered() || f.Return < from || f.Return > x.Return {
			continue
		}
		if f.Status != x.Status || f.Reply != x.Reply {
			return false
		}
		n++
	}
	return n >= 2
}
