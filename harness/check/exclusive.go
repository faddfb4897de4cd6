package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/stores"
)

// clientKey names a client's hold on a key: checkExclusive excuses a run
// whose client was paused or crashed on that key after its claim, at a
// "run." failpoint (so a takeover of it was legitimate).
type clientKey struct {
	client int
	key    stores.KeyRef
}

// stalled is how long the harness's own process stood still (FaultStall)
// between from and to: every owner in it was paused that long.
func stalled(stalls []history.Fault, from, to int64) time.Duration {
	var d int64
	for _, f := range stalls {
		if lo, hi := max(f.Start, from), min(f.End, to); hi > lo {
			d += hi - lo
		}
	}
	return time.Duration(d)
}

// checkExclusive compares the work runs of each key pairwise. A run b
// that starts while an earlier run a (another token) is still going is a
// violation unless the owner whose claim came first (a's, or b's when b's
// claim came back before a's was sent and b ran its work late) was unhealthy: paused or crashed
// by the harness at a failpoint on the key, or short of half the LockTTL
// between its claim and b's start, spent waiting for its claim's answer
// or with the harness's own process standing still (FaultStall). The
// owner taken over is the one that may be stale; the owner that took the
// key over holds the live claim. Half the LockTTL is the tolerance: an
// owner that lost that much of its lease to the machine, not to its work,
// can have been taken over legitimately, and fencing judges its writes;
// an owner whose own work outlasts the LockTTL (the lock-shorter-than-work
// mutant) is not excused.
func checkExclusive(e Evidence, ops []history.Op) Result {
	var vs []Violation
	fs := e.Hist.Faults()
	var stalls []history.Fault
	for _, f := range fs {
		if f.Kind == history.FaultStall {
			stalls = append(stalls, f)
		}
	}
	claimedAt := map[stores.KeyRef]map[stores.Token]history.Op{} // token -> its claim
	for _, op := range ops {
		if op.IsClaim() {
			if claimedAt[op.Input.Key] == nil {
				claimedAt[op.Input.Key] = map[stores.Token]history.Op{}
			}
			claimedAt[op.Input.Key][op.Output.Decision.Token] = op
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
	// key, or its lease ran while it waited for the answer to its claim (a
	// claim that took long to come back, on a loaded machine: a queue for
	// the write lock) and while the harness's process stood still, until
	// at: half a LockTTL lost that way, and it is not a healthy owner.
	unhealthy := func(r history.WorkRun, at int64) bool {
		if sick[clientKey{r.Client, r.Key}] {
			return true
		}
		lost := time.Duration(0)
		from := r.Start
		if c, ok := claimedAt[r.Key][r.Token]; ok {
			lost, from = time.Duration(c.Return-c.Call), c.Return
		}
		return 2*(lost+stalled(stalls, from, at)) >= e.Model.LockTTL
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
				// stale one). Claims that overlap in time are judged by a,
				// as two claims granted at once are the race this checker
				// is for.
				ca, okA := claimedAt[k][a.Token]
				cb, okB := claimedAt[k][b.Token]
				older := a
				if okA && okB && cb.Return < ca.Call {
					older = b
				}
				if unhealthy(older, b.Start) {
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
	sortViolations(vs)
	detail := fmt.Sprintf("%d work runs, none overlapping a healthy owner", runs)
	if excused > 0 {
		detail += fmt.Sprintf(" (%d overlaps excused: the owner whose claim came first was paused or crashed by the harness, or lost half a LockTTL or more waiting for its claim's answer or to the harness's own stalls)", excused)
	}
	return result(Exclusive, vs, detail)
}
