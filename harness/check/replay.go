package check

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// checkReplay proves [Replay]: every replay is of a response some
// Complete had saved, and every client with the same parameters got the
// same answer for a key within one life of it. A key's answers are in its
// part, as are its calls.
func checkReplay(e Evidence, g grouped) countTally {
	var vs []Violation
	keyed, order := g.keyed, g.order
	replays := 0
	for _, k := range order {
		kops := keyed[k]
		for _, r := range kops {
			if r.Input.Kind != models.Begin || !r.Output.Decided() || r.Output.Decision.Outcome != stores.Replay {
				continue
			}
			replays++
			found := false
			for _, c := range kops {
				if c.Input.Kind == models.Complete && !c.Output.Fenced && !c.Output.NotApplied && c.Call < r.Return && c.Input.Response == r.Output.Decision.Response {
					found = true
					break
				}
			}
			if !found {
				vs = append(vs, Violation{Replay, k.String(), fmt.Sprintf(
					"client %d was replayed %d %q for %s at %s, which no Complete had saved",
					r.Client, r.Output.Decision.Response.Status, r.Output.Decision.Response.Body, k, ms(r.Return))})
			}
		}
	}
	// Every client that got an answer for a key with the same parameters
	// got the same answer, within one life of the key: once a key saved
	// done has been claimed again (its record expired, was pruned or
	// released), the new owner's answer is a new one. Whether that claim
	// was allowed is at-most-once's and linearizability's to judge (inside
	// the retention it is a violation there), so it is not reported twice.
	// A key is known done from the first accepted save, or the first
	// replay (a save whose answer was lost may still have landed). A claim
	// sent after that starts a new life. So does a claim that may be
	// ordered after it (it returned after the save or replay was called)
	// when something may have emptied the key before it returned: a
	// release or prune called by then, or the retention running out. A
	// Begin that waited 20 s on a loaded Postgres was sent before the save
	// and decided, past a prune, long after it (a soak found it on
	// takeover and sched-retention); a claim racing the save with nothing
	// to empty the key between them is the same life, and two answers in
	// it are a violation here too.
	reclaimed := map[stores.KeyRef]int64{} // the first such claim, by its call
	for _, k := range order {
		kops := keyed[k]
		doneCall, doneAt := int64(-1), int64(-1)
		for _, op := range kops {
			replayed := op.Input.Kind == models.Begin && op.Output.Decided() && op.Output.Decision.Outcome == stores.Replay
			if !op.Accepted(models.Complete) && !replayed {
				continue
			}
			if doneCall < 0 || op.Call < doneCall {
				doneCall = op.Call
			}
			if doneAt < 0 || op.Return < doneAt {
				doneAt = op.Return
			}
		}
		if doneCall < 0 {
			continue
		}
		born, _ := firstPossibleClaim(kops)
		reset := g.firstReset(kops)
		for _, op := range kops {
			if !op.IsClaim() || op.Return <= doneCall {
				continue
			}
			if op.Call > doneAt || reset < op.Return || mayBeExpired(e.Model, born, op, g.prunes) {
				reclaimed[k] = op.Call
				break
			}
		}
	}
	first := map[string]history.Answer{}
	// In the order they were given (At), not recorded: a client whose
	// answer is recorded late (not scheduled on a loaded machine) must
	// not make a later life's answer look like the first.
	answers := e.Hist.Answers()
	slices.SortStableFunc(answers, func(a, b history.Answer) int { return cmp.Compare(a.At, b.At) })
	for _, a := range answers {
		if a.Err != "" || a.Client == e.ProbeClient {
			continue
		}
		id := a.Key.String() + "\x00" + a.Fingerprint
		f, ok := first[id]
		if !ok {
			first[id] = a
			continue
		}
		if at, ok := reclaimed[a.Key]; ok && at < a.At && f.Response != a.Response {
			continue // a later life of the key answered
		}
		if f.Response != a.Response {
			vs = append(vs, Violation{Replay, a.Key.String(), fmt.Sprintf(
				"clients %d and %d got different answers for %s: %d %q and %d %q",
				f.Client, a.Client, a.Key, f.Response.Status, f.Response.Body, a.Response.Status, a.Response.Body)})
		}
	}
	return countTally{n: replays, vs: vs}
}
