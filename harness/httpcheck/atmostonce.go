package httpcheck

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"sort"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// checkAtMostOnce judges the ledger: one effect per order. The policy's
// in-flight TTL ([Policy.InFlightTTL]) is the service's lease: a pause
// shorter than it excuses nothing.
func checkAtMostOnce(xs []history.Exchange, charges []history.Charge, fs []history.Fault, p Policy) Result {
	byOrder := map[string][]history.Charge{}
	for _, c := range charges {
		if c.Effective {
			byOrder[c.Order] = append(byOrder[c.Order], c)
		}
	}
	kills := killsOf(xs, fs)
	xByOrder := map[string][]history.Exchange{}
	for _, x := range xs {
		xByOrder[x.Order] = append(xByOrder[x.Order], x)
	}
	r := Result{Checker: AtMostOnce, Applied: len(charges) > 0,
		Detail: fmt.Sprintf("%d orders charged, none twice", len(byOrder))}
	if !r.Applied {
		r.Detail = "the provider saw no charge: the service never called it (is its URL passed? does it send the order?)"
	}
	orders := make([]string, 0, len(byOrder))
	for o := range byOrder {
		orders = append(orders, o)
	}
	sort.Strings(orders)
	var vs []Violation
	for _, order := range orders {
		cs := byOrder[order]
		if len(cs) < 2 {
			continue
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].At < cs[j].At })
		oxs := xByOrder[order]
		for i := 1; i < len(cs); i++ {
			first, second := cs[i-1], cs[i]
			if kills.across(first.Via, first.At, second.At) && !succeeded(oxs, first.At, second.At) {
				r.Notes = append(r.Notes, fmt.Sprintf("order %s charged again (%s after %s) after idemcheck killed %s between the two, and no client got a success for the order in between: at-least-once after a crash, excused%s",
					order, second.ID, first.ID, via(first), unkeyedRerun(first, second)))
				continue
			}
			if staleResumed(fs, oxs, first, second, p.InFlightTTL) {
				r.Notes = append(r.Notes, fmt.Sprintf("order %s charged twice (%s, then %s) while idemcheck paused an instance that held a request of the order from before the pause until just before its charge: an owner whose lease ran out while it stood still, acting on its claim after another request took the key over (only a provider that checks fencing tokens can refuse it): at-least-once after a pause, excused",
					order, first.ID, second.ID))
				continue
			}
			if pausedPastLease(fs, oxs, first, second, p.InFlightTTL) && !succeeded(oxs, first.At, second.At) {
				r.Notes = append(r.Notes, fmt.Sprintf("order %s charged again (%s after %s) while idemcheck paused an instance across one of the charges, and no client got a success for the order in between: at-least-once after a pause that outlived the service's lease, excused",
					order, second.ID, first.ID))
				continue
			}
			cause, why := Classify(oxs, fs, first, second, hungUpWith(charges, first))
			if d := stalled(fs, first.At, second.At); d > 0 {
				why += fmt.Sprintf(" (idemcheck itself stood still for %v between them: a charge held that long may outlive a lock TTL that is too short)", d)
			}
			why += shortPause(fs, first, second, p.InFlightTTL)
			key := order
			for _, x := range oxs {
				if x.HasKey {
					key = x.Key
					break
				}
			}
			if len(cs) > 2 {
				why += fmt.Sprintf(" (the order was charged %d times in all)", len(cs))
			}
			vs = append(vs, Violation{Checker: AtMostOnce, Key: key, Cause: cause, At: second.At, Detail: fmt.Sprintf(
				"order %s (key %s) charged twice: %s by %s at %s, %s by %s at %s: %s",
				order, key, first.ID, via(first), ms(first.At), second.ID, via(second), ms(second.At), why)})
			break
		}
	}
	if n := len(r.Notes); n > 0 && len(vs) == 0 {
		r.Detail = fmt.Sprintf("%d orders charged, none twice but for %d excused (the notes say why)", len(byOrder), n)
	}
	r.Notes = append(r.Notes, chargedAtOnce(charges)...)
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

// exitedNear reports when instance inst exited by itself
// ([history.FaultInstanceExit]) between from and a moment after to (the
// provider counts a hang-up when it writes its answer, a moment after
// the process is gone), if it did.
func exitedNear(fs []history.Fault, inst string, from, to int64) (int64, bool) {
	for _, f := range fs {
		if f.Kind == history.FaultInstanceExit && inst != "" && f.Failpoint == inst && f.Start >= from && f.Start <= to+pauseSlack {
			return f.Start, true
		}
	}
	return 0, false
}

// pauseSlack is how near a pause must come to a charge to be the reason
// its instance could not act on it: the time a paused process would have
// taken to record the provider's answer, or to call the provider after
// resuming, on a loaded machine.
const pauseSlack = int64(500 * time.Millisecond)

// pausedPastLease reports whether idemcheck paused (SIGSTOP) the first
// charge's instance when the provider answered it, and the second charge
// came once the pause had begun: the first's owner could not record the
// outcome, and once its lease ran out another instance took the key
// over. To a service whose claims expire, an owner paused past its lease
// is an owner that died: the same at-least-once as after a kill. A short
// pause between two charges away from either excuses nothing, nor one
// that began after the second charge, nor two charges the provider made
// at once (two per-process locks racing, a pause 450 ms after both, were
// excused). Under a declared lease (ttl, [Policy.InFlightTTL]) the lease
// must also be able to have run out ([leaseRanOut]), taken when the pause
// began or the earliest request of the order (xs) at that instance open
// when the first charge was made: a 600 ms pause under a declared 30 s
// lease was excused.
func pausedPastLease(fs []history.Fault, xs []history.Exchange, first, second history.Charge, ttl time.Duration) bool {
	answered := cmp.Or(first.End, first.At)
	if first.End > 0 && second.At < first.End {
		return false // concurrent: no lease ran out between them
	}
	for _, f := range fs {
		if f.Kind != history.FaultInstancePause || first.Via != "" && f.Failpoint != first.Via || f.Start > answered+pauseSlack || f.End < answered || second.At < f.Start {
			continue
		}
		claimed := f.Start
		for _, x := range xs {
			if x.Purpose != history.PurposeReuse && x.Err != "connection refused" && (first.Via == "" || x.Instance == first.Via) &&
				x.Call < min(first.At, claimed) && closedAt(x, fs) >= first.At {
				claimed = x.Call
			}
		}
		if leaseRanOut(ttl, claimed, second.At, f) {
			return true
		}
	}
	return false
}

// leaseRanOut reports whether a lease of ttl taken no earlier than
// claimed can have run out by the end of the pause f (pauseSlack after
// it, while the owner resumed to save its work) and by at, when another
// request charged: renewed or not, it expires no sooner than claimed plus
// ttl. With no ttl declared, any can have.
func leaseRanOut(ttl time.Duration, claimed, at int64, f history.Fault) bool {
	return ttl <= 0 || claimed+int64(ttl) <= min(f.End+pauseSlack, at)
}

// shortPause says, under a declared lease (ttl), that idemcheck paused an
// instance of the pair between the two charges for less than the lease:
// why the pause excused nothing. "" otherwise.
func shortPause(fs []history.Fault, first, second history.Charge, ttl time.Duration) string {
	for _, f := range fs {
		if ttl > 0 && f.Kind == history.FaultInstancePause && f.Start <= second.At && f.End >= first.At &&
			(f.Failpoint == first.Via || f.Failpoint == second.Via) && f.End+pauseSlack-f.Start < int64(ttl) {
			return fmt.Sprintf(" (idemcheck paused %s for %v between them, too short for the declared --inflight-ttl %v to run out: not excused)",
				f.Failpoint, time.Duration(f.End-f.Start).Round(time.Millisecond), ttl)
		}
	}
	return ""
}

// staleOwnerLease returns the pause (and true) in which the charge c's
// instance stood still as an owner whose lease ran out: idemcheck paused
// it from at or before since until just before c (pauseSlack), and a
// request of the order (xs: the order's exchanges) was at that instance
// when the pause began (sent before it, not yet answered). The owner had
// its claim (or was about to charge) when it stopped; its lease ran out,
// and another request could take the key over; resumed, the owner charges
// as it was about to. No check before the charge closes that window, and
// a provider given no downstream key cannot refuse the stale charge. A
// request that reached the instance only during the pause (the kernel
// queues it) is no owner. Under a declared lease (ttl), taken when the
// owner's request was sent, it must be able to have run out before taken,
// when the taker charged ([leaseRanOut]).
func staleOwnerLease(fs []history.Fault, xs []history.Exchange, c history.Charge, since int64, ttl time.Duration, taken int64) (history.Fault, bool) {
	for _, f := range fs {
		if f.Kind != history.FaultInstancePause || c.Via == "" || f.Failpoint != c.Via ||
			f.Start > since || f.End > c.At || f.End < c.At-pauseSlack {
			continue
		}
		for _, x := range xs {
			if x.Instance == f.Failpoint && x.Purpose != history.PurposeReuse && x.Call < f.Start && ends(x) > f.Start && leaseRanOut(ttl, x.Call, taken, f) {
				return f, true
			}
		}
	}
	return history.Fault{}, false
}

// staleResumed reports whether one of two charges of an order came from
// an owner that stood still while another request took its key over
// ([staleOwnerLease]), in either order: the second, paused from before the
// first charge (the taker charged, and may have answered a client, while
// it stood still: a success in between does not make it a violation, as
// it does after a kill); or the first, paused until just before it, while
// the request that made the second was sent during the pause and still
// open when the first charge came (the taker claimed the expired key,
// and charged after the stale owner did); under a declared lease (ttl),
// one that can have run out before the taker charged.
func staleResumed(fs []history.Fault, xs []history.Exchange, first, second history.Charge, ttl time.Duration) bool {
	if _, ok := staleOwnerLease(fs, xs, second, first.At, ttl, first.At); ok {
		return true
	}
	f, ok := staleOwnerLease(fs, xs, first, first.At, ttl, second.At)
	if !ok {
		return false
	}
	for _, x := range xs {
		if x.Purpose != history.PurposeReuse && (second.Via == "" || x.Instance == second.Via) &&
			x.Call >= f.Start && x.Call <= f.End && ends(x) > first.At && x.Call < second.At {
			return true
		}
	}
	return false
}

// succeeded reports whether some client got a success for the order
// between from and to that carries its outcome ([completed]: a 202 only
// says the work was queued): the service had the first charge's outcome
// and answered it, so it cannot have died before saving it.
func succeeded(xs []history.Exchange, from, to int64) bool {
	for _, x := range xs {
		if x.HasKey && x.Purpose != history.PurposeReuse && completed(x.Status) && x.Return > from && x.Return < to {
			return true
		}
	}
	return false
}

// diedAfter returns when the instance's process first died (a kill or an
// exit) after the request was sent, or 0: a request it was running then
// is over, whatever the client saw (a reset, a timeout, a reply lost on
// the way) and however long after the client gave up (a request whose
// reply a network fault lost, its instance killed later, was still open
// for ever, and a key forgotten on restart was said to be two
// executions at once).
func diedAfter(fs []history.Fault, inst string, call int64) int64 {
	first := int64(0)
	for _, f := range fs {
		if (f.Kind == history.FaultInstanceKill || f.Kind == history.FaultInstanceExit) && f.Failpoint == inst && f.Start >= call && (first == 0 || f.Start < first) {
			first = f.Start
		}
	}
	return first
}

// closedAt is when an exchange was over for the service, as far as the
// exchanges and faults tell: its answer; for a refused connection, the
// refusal (it never reached the service); for a reply idemcheck's
// network fault lost ([lostReply]), its loss; for a request whose
// instance died after it was sent ([diedAfter]), the death; else never
// (a request with no answer may still be running).
func closedAt(x history.Exchange, fs []history.Fault) int64 {
	switch {
	case x.Answered():
		return x.Return
	case x.Err == "connection refused":
		return max(x.ErrAt, x.Call)
	case lostReply(x, fs):
		return x.ErrAt
	}
	if d := diedAfter(fs, x.Instance, x.Call); d > 0 {
		return d
	}
	return history.Never
}

// lostReply reports whether x's connection closed without an answer as
// a [history.FaultNetLostReply] lost its instance's replies (until
// pauseSlack after it healed) and no reset fault was on: the proxy closes
// a connection as the service's reply comes, so the service was done
// with x. A request whose reply was lost was blamed as open 9.2 s later.
func lostReply(x history.Exchange, fs []history.Fault) bool {
	lost := false
	for _, f := range fs {
		if f.Failpoint == x.Instance && x.ErrAt >= f.Start && x.ErrAt <= f.End+pauseSlack {
			lost = lost || f.Kind == history.FaultNetLostReply
			if f.Kind == history.FaultNetReset {
				return false // a reset closes connections whose work goes on
			}
		}
	}
	return lost && x.Err == "connection closed without an answer" && x.ErrAt > x.Call
}

// Classify says what happened between two charges of one order, from the
// ledger and the order's exchanges, in this order: the provider was still
// making the first when the second came (concurrent); the instance that
// made the first exited by itself as the provider answered it
// (after-crash); the provider failed the first, or the service stopped
// waiting for it, before the second (after-error: the claim was released
// although the charge went through, whether or not a client saw the
// 5xx; or the service retried the provider within one request:
// [retriedWithin]), unless a client got a definite answer for the key in
// between ([answeredBefore]: after-done); a request that could have made
// the first (sent before it, to the instance that made it) was still open
// when the second came (concurrent); a client got a 5xx in between
// (after-error, unless the key was answered); or else every request that
// could have made the first had been answered or had died with its
// instance (after-done: the record was lost or not shared).
//
// together counts the other charges of the first's instance whose
// connections closed within hangUpBurst of the first's ([hungUpWith]):
// several at once are a process that died, not a deadline.
func Classify(xs []history.Exchange, fs []history.Fault, first, second history.Charge, together int) (string, string) {
	if first.End > 0 && second.At < first.End {
		return CauseConcurrent, fmt.Sprintf(
			"the provider was still making %s (until %s) when %s came: two executions held the key at once (a lock that is not shared, or none%s)",
			first.ID, ms(first.End), second.ID, outlived(xs, fs, first, second))
	}
	other := ""
	if first.Via != "" && second.Via != "" && first.Via != second.Via {
		other = fmt.Sprintf(" (%s charged again, not %s: or the record of the error was kept by %s alone)", second.Via, first.Via, first.Via)
	}
	forgot := "every request that could have made the first charge had been answered (or had died) before the second: the service forgot the key"
	answer, answered := answeredBefore(xs, first, second)
	if answered {
		forgot = "the key had been answered before it was charged again (" + answer + "): the service kept the key's record, then forgot it"
		if first.Errored() {
			forgot = "the key had been answered before it was charged again (" + answer + "): the claim was not released after the error; the service kept the key's record, then forgot it"
		}
	}
	forgot += " (a record lost on restart, kept per instance, or expired: a retention shorter than the run, whose retries come up to --duration plus --settle after the key's first request)" +
		overlapped(xs, fs, first, second) + expiredUnder(xs, fs, first, second)
	if at, ok := exitedNear(fs, first.Via, first.At, first.End); ok && first.Outcome == history.OutcomeHungUp {
		// The connection closed because the process did: no deadline,
		// no error answered (an instance killed from outside was said
		// to have stopped waiting for its charge).
		return CauseAfterCrash, fmt.Sprintf(
			"%s, which made %s, exited by itself at %s as the provider answered it (the connection closed with the process): the charge's outcome died with it, and the key was charged again once its claim was taken over; only a downstream key makes the work safe to run again after a crash (idemcheck excuses that only after a kill of its own)%s",
			first.Via, first.ID, ms(at), other)
	}
	if first.Outcome == history.OutcomeHungUp && together >= hangUpCrowd {
		// An instance killed from outside idemcheck (--target) was said
		// to have stopped waiting for its charges, its own deadline.
		return CauseAfterCrash, fmt.Sprintf(
			"the connection of %s closed at %s with those of %d other charges of %s within %v: its process died (outside idemcheck's knowledge: idemcheck killed nothing then), or one deadline passed for them all at once; the charge's outcome was lost, and the key was charged again once its claim was taken over; only a downstream key makes the work safe to run again after a crash%s",
			first.ID, ms(first.End), together, via(first), time.Duration(hangUpBurst), other)
	}
	if first.Errored() {
		what := fmt.Sprintf("the provider made %s and answered it 503 at %s (its failure, in its ledger)", first.ID, ms(first.End))
		released := ": the claim was released after an error although the charge went through (release on error)"
		if first.Outcome == history.OutcomeHungUp {
			what = fmt.Sprintf("the service stopped waiting for %s at %s (its own deadline) although the charge went through", first.ID, ms(first.End))
			released = ", and charged again: the claim was released after an error"
		}
		if w, ok := retriedWithin(xs, fs, first, second); ok {
			return CauseAfterError, what + ": " + w
		}
		if answered {
			return CauseAfterDone, forgot
		}
		return CauseAfterError, what + released + rekeyed(first, second) + other + overlapped(xs, fs, first, second)
	}
	if x, ok := openRequest(xs, fs, first.Via, math.MinInt64, first.At, second.At+1); ok {
		open := "no answer yet"
		if x.Answered() {
			open = fmt.Sprintf("answered %d at %s", x.Status, ms(x.Return))
		} else if x.Err != "" {
			open = "no answer (" + x.Err + "), and its instance did not die"
		}
		return CauseConcurrent, fmt.Sprintf(
			"the request that could have made %s (client %d on %s, sent at %s, %s) was still open when %s came: two executions held the key at once (a lock that is not shared, or none%s)",
			first.ID, x.Client, x.Instance, ms(x.Call), open, second.ID, outlived(xs, fs, first, second))
	}
	for _, x := range xs {
		if !answered && x.Answered() && x.Status >= 500 && x.Return > first.At && x.Return < second.At {
			return CauseAfterError, fmt.Sprintf(
				"client %d got %d from %s at %s between the two: the claim was released after an error although the charge went through (release on error)%s",
				x.Client, x.Status, x.Instance, ms(x.Return), rekeyed(first, second))
		}
	}
	return CauseAfterDone, forgot
}

// answeredBefore says how a client got a definite answer for the key
// after the provider answered the first charge and before the second: a
// success that carries its outcome ([completed]), or a 5xx answered
// again ([sameReply]) to a request sent after it was given (a saved
// error replayed). The claim was then not released after the error: the
// record was kept, and lost later. A saved 502 replayed for 1.9 s, the
// key then pruned and charged again, was said to be a release on error.
func answeredBefore(xs []history.Exchange, first, second history.Charge) (string, bool) {
	from := cmp.Or(first.End, first.At)
	in := func(x history.Exchange) bool {
		return x.HasKey && x.Purpose != history.PurposeReuse && x.Answered() && x.Return > from && x.Return < second.At
	}
	for _, e := range xs {
		if !in(e) {
			continue
		}
		if completed(e.Status) {
			return fmt.Sprintf("client %d got %d from %s at %s", e.Client, e.Status, e.Instance, ms(e.Return)), true
		}
		if e.Status < 500 {
			continue
		}
		n, last := 0, e.Return
		for _, x := range xs {
			if in(x) && x.Call > e.Return && x.Status == e.Status && sameReply(x.Reply, e.Reply) {
				n, last = n+1, max(last, x.Return)
			}
		}
		if n > 0 {
			return fmt.Sprintf("client %d got %d from %s at %s, and the same answer was replayed until %s (replays: %d)",
				e.Client, e.Status, e.Instance, ms(e.Return), ms(last), n), true
		}
	}
	return "", false
}

// retriedWithin says, of a pair whose first charge erred, that the
// service charged again within the one request that made the first: one
// instance made both, a single request of the order (xs) was open there
// across both ([closedAt]), and no other request of the order reached it
// in between. No claim was released: the service retried the provider
// itself, with a new downstream key ([history.Charge].Key) per attempt,
// or none (the cause stays after-error). A retry of a 503'd charge with a
// new key was said to be a release on error. "" and false otherwise.
func retriedWithin(xs []history.Exchange, fs []history.Fault, first, second history.Charge) (string, bool) {
	var owner history.Exchange
	n := 0
	for _, x := range xs {
		if x.Instance == first.Via && x.Err != "connection refused" && x.Call < second.At && closedAt(x, fs) >= first.At {
			owner, n = x, n+1
		}
	}
	if first.Via == "" || first.Via != second.Via || n != 1 || owner.Purpose == history.PurposeReuse || owner.Call >= first.At ||
		closedAt(owner, fs) < second.At || first.Key == second.Key && first.Key != "" {
		return "", false // (the same key: the provider would have answered the first charge)
	}
	how := "sending the provider no downstream key (a retry loop around the provider call, which cannot tell a retry from a new charge)"
	if first.Key != second.Key {
		how = fmt.Sprintf("with a new downstream key (%s, then %s: a retry loop that makes a key per attempt)", cmp.Or(first.Key, "none"), cmp.Or(second.Key, "none"))
	}
	return fmt.Sprintf("%s made %s, then %s, while client %d's request (sent at %s) was open there, and no other request of the order reached %s in between: the service charged again within that one request %s, not after releasing a claim; a retry must send the first attempt's downstream key, so that the provider answers the charge that went through",
		first.Via, first.ID, second.ID, owner.Client, ms(owner.Call), first.Via, how), true
}

// expiredUnder says, of an after-done pair, that a request that could
// have made the second charge was sent while the provider was still
// making the first and stayed open until the second: its execution began
// while the first's owner was at work, as a claim that expired under its
// owner (a lease shorter than the work) lets it, and charged once the
// owner was done. "" otherwise. A 300 ms lease under a 300 ms charge was
// told only as a forgotten key.
func expiredUnder(xs []history.Exchange, fs []history.Fault, first, second history.Charge) string {
	if first.End == 0 {
		return ""
	}
	if x, ok := openRequest(xs, fs, second.Via, first.At, first.End, second.At); ok {
		return fmt.Sprintf("; or a lease: client %d's request on %s, sent at %s while the provider was still making %s (until %s), was still open when %s came: a claim that expired under its owner (a lease shorter than the work, the save included) let it in, and it charged once the owner was done",
			x.Client, x.Instance, ms(x.Call), first.ID, ms(first.End), second.ID)
	}
	return ""
}

// overlapped says, of an after-done or after-error pair, that a request to the instance
// that made the second charge was sent before the first charge was made
// and was still open at the second: the two requests were in the service
// at once, and a check that did not see the other's claim (a SELECT, then
// an INSERT) explains the pair as well as a forgotten record does ("" when
// no request was). A planted check-then-insert race was said to be a
// forgotten key, pointing at retention.
func overlapped(xs []history.Exchange, fs []history.Fault, first, second history.Charge) string {
	if x, ok := openRequest(xs, fs, second.Via, math.MinInt64, first.At, second.At+1); ok {
		return fmt.Sprintf("; or a race: client %d's request on %s, sent at %s before %s was made, was still open when %s came, so the two requests were in the service at once and its check did not see the other's claim (a check and a claim that are not one atomic step, as a SELECT then an INSERT, or a lock per instance)",
			x.Client, x.Instance, ms(x.Call), first.ID, second.ID)
	}
	return ""
}

// openRequest is the first request of the order (not a reuse, one that
// reached the service) sent to the instance via ("" for any) strictly
// between from and to and still open at at ([closedAt]): one that could
// have made a charge then. The checks of a pair of charges ask it of
// different windows.
func openRequest(xs []history.Exchange, fs []history.Fault, via string, from, to, at int64) (history.Exchange, bool) {
	for _, x := range xs {
		if x.Purpose == history.PurposeReuse || x.Call <= from || x.Call >= to || via != "" && x.Instance != via || x.Err == "connection refused" {
			continue
		}
		if closedAt(x, fs) >= at {
			return x, true
		}
	}
	return history.Exchange{}, false
}

// leaseGap is how long after a charge another charge of its order must
// come, its owner's request still open, for the owner to have outlived a
// lease rather than shared no lock: two executions that each hold a lock
// of their own charge within moments of each other.
const leaseGap = int64(time.Second)

// outlived says, when the second charge came long after the first
// ([leaseGap]), or a tenth of that after it from a request sent once the
// first had begun ([sentAfter]), and the first's owner was still at
// work, that a claim which expires may have run out under its owner: no fault of
// idemcheck's stopped that owner (a pause is excused: [staleResumed]),
// so the service itself was slow (its requests queued, a save waiting on
// a lock) past its own lease, as a retry storm makes it. "" otherwise.
func outlived(xs []history.Exchange, fs []history.Fault, first, second history.Charge) string {
	if gap := second.At - first.At; gap < leaseGap && (gap < leaseGap/10 || !sentAfter(xs, fs, first, second)) {
		return ""
	}
	return fmt.Sprintf("; or a lease: %s came %v after %s, whose owner had not yet answered: if the service's claims expire, its owner outlived its own lease (slowed, not stopped: its requests queued, or its save waited on a lock) and another request took the key over; a lease must outlast all of the owner's work, its save included, or the provider must be given a key to refuse the second charge",
		second.ID, time.Duration(second.At-first.At).Round(time.Millisecond), first.ID)
}

// sentAfter reports whether a request of the order that could have made
// second (sent before it, to its instance, still open then) was sent
// after first began: the second execution may have started while the
// first was at work, as a retry taking over an expired lease does, not
// beside it, as two first requests racing through a lock of their own
// do (a 300 ms lease under a 700 ms charge was named only a lock not
// shared).
func sentAfter(xs []history.Exchange, fs []history.Fault, first, second history.Charge) bool {
	_, ok := openRequest(xs, fs, second.Via, first.At, second.At, second.At)
	return ok
}

var chargeID = regexp.MustCompile(`\bch_[0-9]+\b`)

// Weakened says which verdicts are weaker because the service's answers
// never carry the provider's charge id ("" when some answer does, or
// nothing was charged): replay-fidelity then compares answers as text
// only. The other verdicts never read the answers' text.
//
// With no success at all there is nothing to look in: that is said as
// such, not as a service whose answers lack the id (a run whose provider
// failed every charge was told its service did not echo the id, which
// it does).
func Weakened(xs []history.Exchange, charges []history.Charge) string {
	if len(charges) == 0 {
		return ""
	}
	succeeded := false
	for _, x := range xs {
		if success(x.Status) && chargeID.MatchString(x.Reply) {
			return ""
		}
		succeeded = succeeded || success(x.Status)
	}
	if !succeeded {
		return "no request got a success, so no answer could carry the provider's charge id: replay-fidelity had no success to compare (at-most-once, its causes and the 422 causes come from the ledger and do not depend on it)"
	}
	return "no answer carries the provider's charge id: replay-fidelity compares answers as text, so a replay of another execution's answer with the same text passes it (at-most-once, its causes and the 422 causes come from the ledger and do not depend on it)"
}

// hangUpBurst is how near each other the provider must count hang-ups of
// one instance's charges to take them for its process dying, and
// hangUpCrowd how many others there must be: a deadline passes for one
// charge at a time.
const (
	hangUpBurst = int64(5 * time.Millisecond)
	hangUpCrowd = 2
)
