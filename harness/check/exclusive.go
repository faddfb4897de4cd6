package check

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// clientKey names a client's hold on a key: checkExclusive excuses a run
// whose client was paused or crashed on that key after its claim, at a
// "run." failpoint (so a takeover of it was legitimate).
type clientKey struct {
	client int
	key    stores.KeyRef
}

// aheadTakeover reports whether the claim cy took over the claim co by a
// clock that ran ahead of real time: by the times the store decided them
// with, co's lease had ended, while by the history's clock far less than a
// lease had passed. A caller-clock store decides by each client's own
// clock, and a client whose clock runs ahead takes a healthy owner over:
// the contract's documented cost of caller clocks (the skew scenario
// counts it as a finding), not two owners the store chose to let run. A
// server-clock store promises one clock for every client: it has no such
// excuse (earlyTakeovers).
func aheadTakeover(m models.Config, co, cy history.Op) bool {
	if m.Clock == stores.ServerClock {
		return false
	}
	do, dy := co.Output.Decision.DecidedAt, cy.Output.Decision.DecidedAt
	lease := m.LockTTL
	if co.Input.Lease > 0 {
		lease = co.Input.Lease
	}
	return cy.Output.Decision.Takeover && !do.IsZero() && !dy.IsZero() &&
		dy.Sub(do) >= lease-m.Slack && time.Duration(cy.Return-co.Call) < lease
}

// earlyTakeovers finds, on a store declared [stores.ServerClock], every
// takeover its own clock cannot have allowed: a claim cy that took the key
// over from the claim co before co's lease had passed by the history's
// clock, counted from co's call (the earliest moment the store can have
// decided co) to cy's return (the latest it can have decided cy), less
// the model's Slack (the server clock's resolution). The server decides
// both by one clock, which runs with the history's (one machine), so the
// owner was healthy by that clock and the takeover was judged by another:
// the request's Now, the clock of a client that runs ahead. On a
// caller-clock store that is the contract's cost of caller clocks
// (aheadTakeover, the skew scenario's finding), and nothing is reported.
//
// co is the key's last claim answered before cy was sent. The claim cy
// took over was co or one made after it (a claim co displaced cannot come
// back), so counting from co's call never shortens its lease. A claim
// whose owner may have let it go before cy was answered (a save or release
// not fenced, answered or not) is not judged: a store that keeps a
// released key's fingerprint may report its reclaim as a takeover.
func earlyTakeovers(m models.Config, ops []history.Op) []Violation {
	if m.Clock != stores.ServerClock {
		return nil
	}
	keyed, order := history.ByKey(ops)
	var vs []Violation
	for _, k := range order {
		kops := keyed[k]
		letGo := func(t stores.Token, by int64) bool {
			for _, x := range kops {
				if x.Input.Token == t && x.Call < by && !x.Output.Fenced &&
					(x.Input.Kind == models.Complete || x.Input.Kind == models.Release) {
					return true
				}
			}
			return false
		}
		for _, cy := range kops {
			if !cy.IsClaim() || !cy.Output.Decision.Takeover {
				continue
			}
			var co history.Op
			found := false
			for _, x := range kops {
				if x.IsClaim() && x.Return < cy.Call && x.Output.Decision.Token != cy.Output.Decision.Token &&
					(!found || x.Return > co.Return) {
					co, found = x, true
				}
			}
			if !found || letGo(co.Output.Decision.Token, cy.Return) {
				continue
			}
			lease := m.LockTTL
			if co.Input.Lease > 0 {
				lease = co.Input.Lease
			}
			age := time.Duration(cy.Return - co.Call)
			if age >= lease-m.Slack {
				continue
			}
			why := "by its request's clock"
			nowKnown := !cy.Input.Now.IsZero() && !co.Input.Now.IsZero()
			d := cy.Input.Now.Sub(co.Input.Now)
			dx, dy := co.Output.Decision.DecidedAt, cy.Output.Decision.DecidedAt
			switch {
			case nowKnown && d >= lease-m.Slack:
				why = fmt.Sprintf("by its request's clock, which read %s after the owner's", d.Round(time.Millisecond))
			case !dx.IsZero() && !dy.IsZero():
				// Neither clock explains it: a store whose lease came
				// out a thousand times too short (seconds compared with
				// milliseconds) was said to go by the request's clock,
				// which it never read.
				reqs := ""
				if nowKnown {
					reqs = fmt.Sprintf(", and the requests' clocks %s apart", d.Round(time.Millisecond))
				}
				why = fmt.Sprintf("by no clock idemcheck can see: its own decision times put the takeover %s after the claim%s, both less than the lease (a staleness rule that is wrong: a unit mixed up, seconds against milliseconds; a comparison the wrong way; the lease read from the wrong field)",
					dy.Sub(dx).Round(time.Millisecond), reqs)
			}
			vs = append(vs, Violation{Exclusive, k.String(), fmt.Sprintf(
				"client %d took over client %d's claim (token %s) of %s at most %s after it was sent, inside its lease of %s: "+
					"the store declares the server's clock, by which the owner was healthy, yet judged the claim stale %s",
				cy.Client, co.Client, tok(co.Output.Decision.Token), k, roundAge(age), lease, why)})
		}
	}
	return vs
}

// decidedBefore reports whether the store decided claim x before claim y,
// by the decision times it returned (both must be known).
func decidedBefore(x, y history.Op) bool {
	dx, dy := x.Output.Decision.DecidedAt, y.Output.Decision.DecidedAt
	return !dx.IsZero() && !dy.IsZero() && dx.Before(dy)
}

// leaseLost is how much of its lease the owner of work run r lost, by
// at, to anything but its own work: judged from what the store decided
// and when, so that the harness's own late client is told from a store
// that let two owners run. The lease counts from its last renewal that
// came back accepted before at (the claim c, or a heartbeat of r's
// token); from that call on, these are lost, each moment once:
//
//   - the renewal's own round trip (the store decided it at some moment
//     of it, and the lease ran from there);
//   - after the claim, the time before r's work began: only the harness
//     runs between a claim's answer and its work, so an owner whose work
//     began late (a goroutine not scheduled on a loaded machine) started
//     on a lease already short, or gone;
//   - every later heartbeat still in flight, or that came back late or
//     fenced: sent in time, decided after the lease had ended, the store
//     rightly let another client take over;
//   - the harness's own process standing still (FaultStall);
//   - the work running on past what it meant to take (WorkRun.Planned,
//     and each sleep between heartbeats, WorkRun.Beat; overrun): its
//     sleep was a few milliseconds, and a starved process woke it late
//     (at load 36 a 20 ms work took 224 ms while LockTTL was 82 ms);
//     its planned time is its own, so the lock-shorter-than-work mutant,
//     whose work is planned longer than the lease, is not excused;
//   - for a store that decides by the request's own time, how old the
//     claim already was when it was sent (sentLate);
//   - once a heartbeat since the renewal was refused (declared not
//     applied) or lost (its outcome unknown), all of it: the lease was
//     not renewed, as a store may refuse any call, and ran out on its
//     own time (a store refusing every third call had a healthy-looking
//     owner taken over, and failed).
//
// Without its claim in the history (ok false), the lease counts from the
// work's start.
func leaseLost(r history.WorkRun, c history.Op, ok bool, beats []history.Op, stalls []history.Fault, at int64) time.Duration {
	from := r.Start
	var lost []span
	if ok {
		from = c.Call
		lost = append(lost, span{c.Call, max(c.Return, r.Start)})
	}
	refused := false // a heartbeat since the last renewal went unrenewed
	for _, x := range beats {
		if x.Input.Token != r.Token || x.Call < from || x.Call >= at {
			continue
		}
		if x.Accepted(models.Extend) && x.Return <= at {
			// A renewal: the lease starts again from it.
			from, lost, refused = x.Call, []span{{x.Call, x.Return}}, false
			continue
		}
		if x.Output.NotApplied || x.Output.Unknown {
			refused = true
		}
		lost = append(lost, span{x.Call, min(x.Return, at)})
	}
	if refused {
		return time.Duration(at - from)
	}
	for _, f := range stalls {
		lost = append(lost, span{f.Start, f.End})
	}
	lost = append(lost, overrun(r, beats)...)
	return covered(lost, from, at) + sentLate(c, ok && from == c.Call)
}

// overrun lists the stretches of r's work that the machine took, not the
// work: each of its sleeps (the whole work, or with heartbeats each step
// before a renewal is sent, WorkRun.Beat) that went on past its planned
// length. beats are the owner's Extend calls on the key, in call order.
func overrun(r history.WorkRun, beats []history.Op) []span {
	if r.Planned <= 0 {
		return nil
	}
	step := r.Planned
	if r.Beat > 0 {
		step = r.Beat
	}
	var out []span
	left, from := r.Planned, r.Start
	for _, x := range beats {
		if r.Beat <= 0 || x.Input.Token != r.Token || x.Call < r.Start || x.Call > r.End || left <= 0 {
			continue
		}
		d := min(step, left)
		if x.Call > from+int64(d) {
			out = append(out, span{from + int64(d), x.Call})
		}
		left -= d
		if from = x.Return; from == history.Never {
			return out
		}
	}
	if end := from + int64(min(step, max(left, 0))); r.End > end {
		out = append(out, span{end, r.End})
	}
	return out
}

// sentLate is how old the claim c already was when it was sent, in the
// eyes of a store that decided it by the request's own time (its
// DecidedAt is the request's Now, stamped by the client before the send):
// a client not scheduled between stamping and sending made a claim whose
// lease was that much gone when it was made. counts is false when the
// lease no longer counts from the claim.
func sentLate(c history.Op, counts bool) time.Duration {
	in := c.Input
	if !counts || in.Sent.IsZero() || !c.Output.Decision.DecidedAt.Equal(in.Now) || !in.Sent.After(in.Now) {
		return 0
	}
	return in.Sent.Sub(in.Now)
}

// span is a stretch of the history's time, [from, to).
type span struct{ from, to int64 }

// covered is how much of [from, to) the spans cover, each moment once.
func covered(spans []span, from, to int64) time.Duration {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var d, end int64
	end = from
	for _, s := range spans {
		lo, hi := max(s.from, end), min(s.to, to)
		if hi > lo {
			d += hi - lo
			end = hi
		}
	}
	return time.Duration(d)
}

// checkExclusive compares the work runs of each key pairwise. A run b
// that starts while an earlier run a (another token) is still going is a
// violation unless the owner whose claim came first (a's, or b's when b's
// claim came back before a's was sent and b ran its work late) was unhealthy: paused or crashed
// by the harness at a failpoint on the key, or short of half its lease by
// b's start to anything but its own work (leaseLost: a claim or heartbeat
// that came back late, a work that began late, the harness's own process
// standing still). The
// owner taken over is the one that may be stale; the owner that took the
// key over holds the live claim. Half the LockTTL is the tolerance: an
// owner that lost that much of its lease to the machine, not to its work,
// can have been taken over legitimately, and fencing judges its writes;
// an owner whose own work outlasts the LockTTL (the lock-shorter-than-work
// mutant) is not excused.
//
// Work runs are in their key's part, and the faults (stalls, a client's
// pause or crash on a key) in every part: a part judges its keys as the
// whole run would.
func checkExclusive(e Evidence, ops []history.Op) exclusiveTally {
	var vs []Violation
	fs := e.Hist.Faults()
	var stalls []history.Fault
	for _, f := range fs {
		if f.Kind == history.FaultStall {
			stalls = append(stalls, f)
		}
	}
	claimedAt := map[stores.KeyRef]map[stores.Token]history.Op{} // token -> its claim
	extends := map[clientKey][]history.Op{}                      // an owner's heartbeats on a key, in call order
	for _, op := range ops {
		if op.IsClaim() {
			if claimedAt[op.Input.Key] == nil {
				claimedAt[op.Input.Key] = map[stores.Token]history.Op{}
			}
			claimedAt[op.Input.Key][op.Output.Decision.Token] = op
		}
		if op.Input.Kind == models.Extend {
			ck := clientKey{op.Client, op.Input.Key}
			extends[ck] = append(extends[ck], op)
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
	// key, or it lost half its lease or more, before at, to anything but
	// its own work (leaseLost): the store may then have let another
	// client take over, and fencing judges the owner's late writes.
	unhealthy := func(r history.WorkRun, at int64) bool {
		if sick[clientKey{r.Client, r.Key}] {
			return true
		}
		c, ok := claimedAt[r.Key][r.Token]
		lease := e.Model.LockTTL
		if ok && c.Input.Lease > 0 {
			lease = c.Input.Lease
		}
		return 2*leaseLost(r, c, ok, extends[clientKey{r.Client, r.Key}], stalls, at) >= lease
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
				// stale one). Claims that overlap in time are ordered by the
				// store's decision times (a claim whose answer came back
				// late, after a takeover of it was decided, is the older);
				// without them, or decided at once, they are judged by a,
				// as two claims granted at once are the race this checker
				// is for.
				ca, okA := claimedAt[k][a.Token]
				cb, okB := claimedAt[k][b.Token]
				older := a
				if okA && okB && (cb.Return < ca.Call || ca.Return >= cb.Call && decidedBefore(cb, ca)) {
					older = b
				}
				co, cy := ca, cb // the older owner's claim, and the other's
				if older.Token == b.Token {
					co, cy = cb, ca
				}
				if okA && okB && aheadTakeover(e.Model, co, cy) || unhealthy(older, b.Start) {
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
	vs = append(vs, earlyTakeovers(e.Model, ops)...)
	return exclusiveTally{runs: runs, excused: excused, vs: vs}
}

// exclusiveTally is what checkExclusive found in a part, or in the parts
// merged so far: the work runs judged, the overlaps excused, and the
// violations.
type exclusiveTally struct {
	runs, excused int
	vs            []Violation
}

// add merges o, the next part's tally, into t.
func (t *exclusiveTally) add(o exclusiveTally) {
	t.runs += o.runs
	t.excused += o.excused
	t.vs = append(t.vs, o.vs...)
}

// decide is the [Exclusive] result of a run's merged tally.
func (t exclusiveTally) decide(e Evidence) Result {
	sortViolations(t.vs)
	detail := fmt.Sprintf("%d work runs, none overlapping a healthy owner", t.runs)
	if e.Model.Clock == stores.ServerClock {
		// What earlyTakeovers judges, and no more: a claim answered
		// while the takeover was already asked is not compared (a pass
		// line claimed the server's clock for claims it never read).
		detail += ", no takeover of a claim answered before it was asked, inside that claim's lease by the history's clock (claims still open when the takeover was asked are judged by linearizability alone)"
	}
	if t.excused > 0 {
		detail += fmt.Sprintf(" (%d overlaps excused: the owner whose claim came first was paused or crashed by the harness, or lost half its lease or more to a late answer, a late start of its work or the harness's own stalls)", t.excused)
	}
	return judged(result(Exclusive, t.vs, detail), t.runs)
}

// roundAge rounds a duration for a message: to the millisecond, or the
// microsecond below one (a takeover 0.1 ms after the claim read "at most
// 0s").
func roundAge(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
