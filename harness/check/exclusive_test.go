package check_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

func TestExclusive(t *testing.T) {
	t.Run("a takeover of a healthy owner that overlaps its work fails", func(t *testing.T) {
		r := newRec()
		r.work(1, "a", 1, 50)
		r.work(2, "b", 20, 60)
		want(t, r, check.Exclusive, check.Fail, "ran the work of")
	})
	t.Run("one violation names every client that overlapped a healthy owner", func(t *testing.T) {
		r := newRec()
		r.work(1, "a", 1, 50)
		r.work(2, "b", 20, 60)
		r.work(3, "c", 30, 70)
		got := r.judge(t, check.Exclusive)
		if got.Verdict != check.Fail || len(got.Violations) == 0 {
			t.Fatalf("%s: %s", got.Verdict, got.Detail)
		}
		if d := got.Violations[0].Detail; !strings.HasPrefix(d, "clients 1, 2 and 3 ran the work of") {
			t.Fatalf("the first violation does not name all three clients: %s", d)
		}
	})
	t.Run("an owner whose claim came back after half its lease is excused", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 60, claimedD("a", false)) // 60 of 100 ms waiting for the answer
		r.work(1, "a", 60, 130)
		r.begin(2, "fp", 101, 102, claimedD("b", true))
		r.work(2, "b", 102, 110)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("an owner whose claim came back at once and who outworked its lease is not excused", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.work(1, "a", 1, 150)
		r.begin(2, "fp", 101, 102, claimedD("b", true))
		r.work(2, "b", 102, 110)
		want(t, r, check.Exclusive, check.Fail, "ran the work of")
	})
	t.Run("an owner whose short work the machine stretched past half its lease is excused", func(t *testing.T) {
		// Found by soak --random-flags on memory at load 36: a 20 ms work
		// ran 224 ms while LockTTL was 82 ms; the takeover was the store's
		// right, and fencing judges the late owner's save.
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.plannedWork(1, "a", 1, 224, 20)
		r.begin(2, "fp", 100, 101, claimedD("b", true))
		r.work(2, "b", 101, 110)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("an owner whose sleeps between heartbeats the machine stretched is excused", func(t *testing.T) {
		// soak --random-flags on lease at load 36: a heartbeat work of
		// 3 × 40 ms steps under a 100 ms lease; the second step's sleep
		// took 150 ms, the lease ran out before the renewal was sent,
		// and the store rightly let another client take over.
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.beatingWork(1, "a", 1, 260, 120, 40)
		r.extend(1, "a", 41, 42, false)
		r.extend(1, "a", 192, 193, true)
		r.begin(2, "fp", 150, 151, claimedD("b", true))
		r.work(2, "b", 151, 200)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("an owner whose heartbeats came in time and was taken over is healthy", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.beatingWork(1, "a", 1, 125, 120, 40)
		r.extend(1, "a", 41, 42, false)
		r.extend(1, "a", 82, 83, false)
		r.begin(2, "fp", 100, 101, claimedD("b", true))
		r.work(2, "b", 101, 110)
		want(t, r, check.Exclusive, check.Fail, "ran the work of")
	})
	t.Run("an owner whose heartbeats the store refused is excused", func(t *testing.T) {
		// idemtest, a Postgres store refusing every third call as not
		// applied (a definite no-op, which the contract allows): the
		// lease was not renewed, ran out, and another client took over.
		refused := func(notApplied bool) *rec {
			r := newRec()
			r.begin(1, "fp", 0, 1, claimedD("a", false))
			r.beatingWork(1, "a", 1, 125, 120, 40)
			r.extend(1, "a", 41, 42, false)
			r.op(1, models.Input{Kind: models.Extend, Token: "a", Called: t0.Add(82 * time.Millisecond), Now: t0.Add(83 * time.Millisecond)},
				models.Output{NotApplied: notApplied}, 82, 83)
			r.begin(2, "fp", 100, 101, claimedD("b", true))
			r.work(2, "b", 101, 110)
			return r
		}
		want(t, refused(true), check.Exclusive, check.Pass, "")
		want(t, refused(false), check.Exclusive, check.Fail, "ran the work of") // renewed: healthy
	})
	t.Run("an owner whose planned work outlasts its lease is not excused", func(t *testing.T) {
		// lock-shorter-than-work: the work means to take 2 LockTTLs.
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.plannedWork(1, "a", 1, 205, 200)
		r.begin(2, "fp", 101, 102, claimedD("b", true))
		r.work(2, "b", 102, 110)
		want(t, r, check.Exclusive, check.Fail, "ran the work of")
	})
	t.Run("a work stretched by less than half the lease is not excused", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.plannedWork(1, "a", 1, 150, 70) // 30 ms of 100 lost by the takeover at 101 ms
		r.begin(2, "fp", 100, 101, claimedD("b", true))
		r.work(2, "b", 101, 110)
		want(t, r, check.Exclusive, check.Fail, "ran the work of")
	})
	t.Run("work after work passes", func(t *testing.T) {
		r := newRec()
		r.work(1, "a", 1, 10)
		r.work(2, "b", 20, 30)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("overlapping a paused owner passes", func(t *testing.T) {
		r := newRec()
		r.work(1, "a", 1, 300)
		r.h.AddFault(history.Fault{Client: 1, Key: key, Kind: history.FaultPause, Failpoint: "run.after-claim", Start: 2 * ms, End: 250 * ms})
		r.work(2, "b", 150, 160)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("an owner the harness's own process stalled past half its lease is excused", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.work(1, "a", 2, 170)
		r.begin(2, "fp", 100, 101, claimedD("b", true))
		r.work(2, "b", 165, 175)
		r.h.AddFault(history.Fault{Client: -1, Kind: history.FaultStall, Failpoint: "harness", Start: 5 * ms, End: 45 * ms})
		want(t, r, check.Exclusive, check.Fail, "at once") // a 40 ms stall is not half of 100 ms
		r.h.AddFault(history.Fault{Client: -1, Kind: history.FaultStall, Failpoint: "harness", Start: 100 * ms, End: 150 * ms})
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("an owner whose work began after its claim had gone stale is excused", func(t *testing.T) {
		// Found with --clients 256 --keys 1000 on memory: the owner
		// claimed at once, its goroutine was not scheduled until its
		// lease had run out, a takeover came legitimately, and the late
		// owner's work overlapped the taker's. Only the harness runs
		// between a claim's answer and its work.
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.begin(2, "fp", 105, 106, claimedD("b", true))
		r.work(2, "b", 107, 200)
		r.work(1, "a", 120, 150)
		want(t, r, check.Exclusive, check.Pass, "")
		// The same owner starting at once and outworking its lease is
		// the store's (or the LockTTL's) fault.
		r = newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.work(1, "a", 2, 150)
		r.begin(2, "fp", 105, 106, claimedD("b", true))
		r.work(2, "b", 107, 200)
		want(t, r, check.Exclusive, check.Fail, "client 1 was healthy")
	})
	t.Run("an owner whose claim came back after a takeover of it was decided is excused", func(t *testing.T) {
		// Found on postgres, store-faults, at load 30: client 1's claim
		// was decided at once and came back 556 ms later; its lease had
		// run out, client 2 took the key over and worked, and client 1,
		// its answer in hand at last, worked too. The two claim calls
		// overlap in time; the store's decision times order them.
		r := newRec()
		r.begin(1, "fp", 0, 556, claimedD("a", false)) // decided at 0 ms (rec.begin)
		r.begin(2, "fp", 300, 301, claimedD("b", true))
		r.work(2, "b", 302, 700)
		r.work(1, "a", 557, 600)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("a claim sent long after its request was stamped, on a caller-clock store, is excused", func(t *testing.T) {
		// Found with --clients 256 --keys 10000 on memory: the client
		// stamped its request, was not scheduled for 350 ms, and sent
		// it; the store took the claim over by its stale time, and
		// rightly let the next client take it over 1 ms later.
		stale := func(sent int64, decidedByNow bool) *rec {
			r := newRec()
			d := claimedD("a", true)
			d.DecidedAt = t0.Add(time.Duration(sent * ms))
			if decidedByNow {
				d.DecidedAt = t0
			}
			r.op(1, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0, Sent: t0.Add(time.Duration(sent * ms))},
				models.Output{Decision: d}, sent, sent+1)
			r.work(1, "a", sent+1, sent+200)
			r.begin(2, "fp", sent+2, sent+3, claimedD("b", true))
			r.work(2, "b", sent+3, sent+50)
			return r
		}
		want(t, stale(350, true), check.Exclusive, check.Pass, "")
		// A store that decided by its own clock (a server's) gave the
		// claim its whole lease: the takeover 1 ms later is a bug.
		want(t, stale(350, false), check.Exclusive, check.Fail, "client 1 was healthy")
	})
	t.Run("a takeover by a client whose clock runs ahead is the caller clock's cost, not a violation", func(t *testing.T) {
		// Found by soak --random-flags (memory, skew, --lock-ttl 85ms):
		// the skewed client, fenced once, retried and took over the
		// owner's fresh claim 7 ms after it was made, by its own clock
		// already a LockTTL later.
		ahead := func(by time.Duration) *rec {
			r := newRec()
			r.begin(1, "fp", 0, 1, claimedD("a", true))
			r.work(1, "a", 1, 50)
			d := claimedD("b", true)
			d.DecidedAt = t0.Add(by)
			r.op(2, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0.Add(by)}, models.Output{Decision: d}, 7, 8)
			r.work(2, "b", 8, 30)
			return r
		}
		want(t, ahead(300*time.Millisecond), check.Exclusive, check.Pass, "")
		// Decided by a clock that agrees with real time, it is two owners.
		want(t, ahead(7*time.Millisecond), check.Exclusive, check.Fail, "client 1 was healthy")
	})
	t.Run("on a server-clock store a takeover by a client whose clock runs ahead is the store's fault", func(t *testing.T) {
		// The skew scenario's episode on a store declared ServerClock that
		// judged staleness by the request's Now: the skewed client took
		// the healthy owner over 8 ms after its claim, and held still until
		// the owner's work was done, so the two works never overlap.
		skew := func(clock stores.ClockSource) *rec {
			r := newRec()
			r.clock = clock
			r.begin(1, "fp", 0, 1, claimedD("a", false))
			r.work(1, "a", 1, 50)
			d := claimedD("b", true)
			d.DecidedAt = t0.Add(7 * time.Millisecond) // the server's clock, which it did not judge by
			r.op(2, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0.Add(207 * time.Millisecond)}, models.Output{Decision: d}, 7, 8)
			r.complete(1, "a", resp, 55, 56, true, false)
			r.work(2, "b", 60, 70)
			return r
		}
		want(t, skew(stores.ServerClock), check.Exclusive, check.Fail, "client 2 took over client 1's claim (token a) of t0/order-o000 at most 8ms after it was sent")
		want(t, skew(stores.ServerClock), check.Exclusive, check.Fail, "which read 207ms after the owner's")
		// A caller-clock store judges by each request's clock: the contract's cost.
		want(t, skew(stores.CallerClock), check.Exclusive, check.Pass, "")
		want(t, skew(""), check.Exclusive, check.Pass, "")
	})
	t.Run("on a server-clock store a takeover no clock explains says so", func(t *testing.T) {
		// A TypeScript store compared Date.now() in milliseconds with
		// a LockTTL in seconds: its lease was a thousand times too
		// short. Neither the requests' clocks nor its own decision
		// times were a lease apart, and the violation blamed the
		// request's clock, which it never read.
		r := newRec()
		r.clock = stores.ServerClock
		c := claimedD("a", false)
		c.DecidedAt = t0
		r.op(1, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0}, models.Output{Decision: c}, 0, 1)
		r.work(1, "a", 1, 50)
		d := claimedD("b", true)
		d.DecidedAt = t0.Add(8 * time.Millisecond)
		r.op(2, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0.Add(7 * time.Millisecond)}, models.Output{Decision: d}, 7, 8)
		r.complete(1, "a", resp, 55, 56, true, false)
		r.work(2, "b", 60, 70)
		want(t, r, check.Exclusive, check.Fail, "by no clock idemcheck can see: its own decision times put the takeover 8ms after the claim, and the requests' clocks 7ms apart")
	})
	t.Run("on a server-clock store a takeover once the lease has passed by the history's clock passes", func(t *testing.T) {
		// The lease is 100 ms and the server clock's slack 5 ms: a takeover
		// answered 95 ms after the claim was sent may be right, 94 ms not.
		at := func(ret int64) *rec {
			r := newRec()
			r.clock = stores.ServerClock
			r.begin(1, "fp", 0, 1, claimedD("a", false))
			r.work(1, "a", 1, 20)
			r.begin(2, "fp", ret-1, ret, claimedD("b", true))
			r.work(2, "b", ret, ret+10)
			return r
		}
		want(t, at(95), check.Exclusive, check.Pass, "")
		want(t, at(94), check.Exclusive, check.Fail, "inside its lease of 100ms")
	})
	t.Run("on a server-clock store a released claim reclaimed as a takeover is not judged", func(t *testing.T) {
		// A store that keeps a released key's fingerprint (a tombstone) may
		// report its reclaim as a takeover: the owner let it go.
		r := newRec()
		r.clock = stores.ServerClock
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.release(1, "a", 5, 6, false)
		r.begin(2, "fp", 10, 11, claimedD("b", true))
		r.work(2, "b", 11, 20)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("on a server-clock store overlapping work after a takeover by a clock ahead is not excused", func(t *testing.T) {
		r := newRec()
		r.clock = stores.ServerClock
		r.begin(1, "fp", 0, 1, claimedD("a", true))
		r.work(1, "a", 1, 50)
		d := claimedD("b", true)
		d.DecidedAt = t0.Add(300 * time.Millisecond)
		r.op(2, models.Input{Kind: models.Begin, Fingerprint: "fp", Now: t0.Add(300 * time.Millisecond)}, models.Output{Decision: d}, 7, 8)
		r.work(2, "b", 8, 30)
		want(t, r, check.Exclusive, check.Fail, "client 1 was healthy")
	})
	t.Run("two claims decided at once, both answered at once, fail", func(t *testing.T) {
		r := newRec()
		r.begin(1, "fp", 0, 2, claimedD("a", false))
		r.begin(2, "fp", 1, 3, claimedD("b", false))
		r.work(1, "a", 3, 50)
		r.work(2, "b", 4, 60)
		want(t, r, check.Exclusive, check.Fail, "ran the work of")
	})
	t.Run("an owner whose heartbeat was decided after its lease had ended is excused", func(t *testing.T) {
		// Found on a lease store written elsewhere, in heartbeat: the
		// renewal was sent in time and decided 203 ms later, the store
		// rightly let another client take over, and the owner's
		// renewal came back fenced.
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.work(1, "a", 1, 400)
		r.extend(1, "a", 40, 41, false)
		r.extend(1, "a", 80, 81, false)
		r.extend(1, "a", 120, 323, true)
		r.begin(2, "fp", 190, 191, claimedD("b", true))
		r.work(2, "b", 192, 250)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("an owner whose heartbeats came back at once and was taken over is healthy", func(t *testing.T) {
		// A store that answers a renewal ok and does not renew the lease.
		r := newRec()
		r.begin(1, "fp", 0, 1, claimedD("a", false))
		r.work(1, "a", 1, 400)
		r.extend(1, "a", 40, 41, false)
		r.extend(1, "a", 80, 81, false)
		r.extend(1, "a", 120, 121, false)
		r.begin(2, "fp", 130, 131, claimedD("b", true))
		r.work(2, "b", 132, 250)
		want(t, r, check.Exclusive, check.Fail, "client 1 was healthy")
	})
	t.Run("a stale owner that starts its work late, inside the work of the owner that took its key over, passes", func(t *testing.T) {
		// Found by a soak (sqlite, skew, seed 59): client 7 claimed first,
		// stood paused after its claim past its lease, client 6 took the
		// key over and started its work, and client 7 ran its own late
		// (its save was fenced). The stale owner is 7, not 6.
		r := newRec()
		r.begin(7, "fp", 0, 1, claimedD("b", false))
		r.h.AddFault(history.Fault{Client: 7, Key: key, Kind: history.FaultPause, Failpoint: "run.after-claim", Start: 1 * ms, End: 170 * ms})
		r.begin(6, "fp", 120, 121, claimedD("a", true))
		r.work(6, "a", 121, 180)
		r.work(7, "b", 170, 175)
		want(t, r, check.Exclusive, check.Pass, "")
	})
	t.Run("a takeover of a healthy owner's live claim fails even when the new owner's work starts first", func(t *testing.T) {
		r := newRec()
		r.begin(7, "fp", 0, 1, claimedD("b", false))
		r.begin(6, "fp", 20, 21, claimedD("a", true)) // 20 ms into a 100 ms lease
		r.work(6, "a", 21, 60)
		r.work(7, "b", 30, 40)
		want(t, r, check.Exclusive, check.Fail, "ran the work of")
	})
	t.Run("work that never ended overlaps everything after it unless its owner crashed", func(t *testing.T) {
		r := newRec()
		r.work(1, "a", 1, -1)
		r.work(2, "b", 150, 160)
		want(t, r, check.Exclusive, check.Fail, "at once")
		r.h.AddFault(history.Fault{Client: 1, Key: key, Kind: history.FaultCrash, Failpoint: "run.after-work", Start: 2 * ms, End: 2 * ms})
		want(t, r, check.Exclusive, check.Pass, "")
	})
}
