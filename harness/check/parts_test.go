package check_test

import (
	"fmt"
	"iter"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// joined is one history of the keys of rs: rec i's calls, work runs,
// answers, faults and charges, each of its keys and orders renamed apart
// by i (and its call ids moved apart), its Prunes as they are. Times are
// kept: the keys run side by side, and every Prune and fault of each rec
// acts on all of them.
func joined(rs ...*rec) *rec {
	out := newRec()
	var charges []history.Charge
	for i, r := range rs {
		rk := func(k stores.KeyRef) stores.KeyRef {
			if k == (stores.KeyRef{}) {
				return k
			}
			return stores.KeyRef{Tenant: k.Tenant, Key: fmt.Sprintf("%s-%d", k.Key, i)}
		}
		ro := func(o string) string { return fmt.Sprintf("%s-%d", o, i) }
		for _, op := range r.h.Ops() {
			op.Input.ID += i * 1_000_000
			op.Input.Key = rk(op.Input.Key)
			out.h.AddOp(op)
		}
		for _, w := range r.h.Work() {
			w.Key, w.Order = rk(w.Key), ro(w.Order)
			out.h.AddWork(w)
		}
		for _, a := range r.h.Answers() {
			a.Key, a.Order = rk(a.Key), ro(a.Order)
			out.h.AddAnswer(a)
		}
		for _, f := range r.h.Faults() {
			f.Key = rk(f.Key)
			out.h.AddFault(f)
		}
		for _, c := range r.l.Charges() {
			c.Order = ro(c.Order)
			if c.Key != "" {
				c.Key = ro(c.Key)
			}
			charges = append(charges, c)
		}
	}
	out.l = history.LedgerOf(charges)
	return out
}

// splitByKey deals the keys of h (in order of first appearance: calls,
// then work runs, then answers) to n parts in turn, or to a part each
// when n is 0: each key's calls, work runs and answers go to its part,
// each charge to the part of its order's key (the key the order's work
// runs and answers name), and every Prune and every fault to every part.
func splitByKey(h *history.History, l *history.Ledger, n int) []check.Part {
	ops, work, answers := h.Ops(), h.Work(), h.Answers()
	partOf := map[stores.KeyRef]int{}
	place := func(k stores.KeyRef) {
		if _, ok := partOf[k]; !ok {
			partOf[k] = len(partOf)
			if n > 0 {
				partOf[k] %= n
			}
		}
	}
	orderKey := map[string]stores.KeyRef{}
	for _, op := range ops {
		if op.Input.Kind != models.Prune {
			place(op.Input.Key)
		}
	}
	for _, w := range work {
		place(w.Key)
		orderKey[w.Order] = w.Key
	}
	for _, a := range answers {
		place(a.Key)
		orderKey[a.Order] = a.Key
	}
	size := n
	if n == 0 {
		size = len(partOf)
	}
	hs := make([]*history.History, size)
	for i := range hs {
		hs[i] = history.New()
	}
	for _, op := range ops {
		if op.Input.Kind == models.Prune {
			for _, p := range hs {
				p.AddOp(op)
			}
			continue
		}
		hs[partOf[op.Input.Key]].AddOp(op)
	}
	for _, w := range work {
		hs[partOf[w.Key]].AddWork(w)
	}
	for _, a := range answers {
		hs[partOf[a.Key]].AddAnswer(a)
	}
	for _, f := range h.Faults() {
		for _, p := range hs {
			p.AddFault(f)
		}
	}
	charges := make([][]history.Charge, size)
	for _, c := range l.Charges() {
		k, ok := orderKey[c.Order]
		if !ok {
			panic("splitByKey: no work run or answer names order " + c.Order)
		}
		charges[partOf[k]] = append(charges[partOf[k]], c)
	}
	parts := make([]check.Part, size)
	for i := range parts {
		parts[i] = check.Part{Hist: hs[i], Ledger: history.LedgerOf(charges[i])}
	}
	return parts
}

// withoutDrawings is results with no Linearization: what a page draws
// is compared apart.
func withoutDrawings(results []check.Result) []check.Result {
	out := slices.Clone(results)
	for i := range out {
		out[i].Linearization = nil
	}
	return out
}

// sameDrawing reports whether a and b keep the same drawing: as many
// operations, of the same keys, or the same note that there are too many
// (a model holds funcs, which reflect.DeepEqual never finds equal).
func sameDrawing(a, b *check.Linearization) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.TooLarge || b.TooLarge {
		return a.TooLarge == b.TooLarge && a.Ops == b.Ops
	}
	ka, na := keptKeys(a)
	kb, nb := keptKeys(b)
	return a.Ops == b.Ops && na == nb && reflect.DeepEqual(ka, kb)
}

// leakProbe is the client id of the leak probes in TestPartsMatchWhole.
const leakProbe = 77

// Histories of one key each for TestPartsMatchWhole, beside happy and
// the builders of the checkers' own tests.

// pruned is happy with a Prune that finds nothing old enough to remove.
func pruned() *rec {
	r := happy()
	r.op(0, models.Input{Kind: models.Prune, Now: t0.Add(100 * time.Millisecond)}, models.Output{}, 100, 101)
	return r
}

func doubleCharge() *rec {
	r := happy()
	r.l.Charge("o000", "", 2, 30*ms) // unkeyed: a second effective charge
	return r
}

func claimedAgain() *rec {
	r := happy()
	r.begin(3, "fp", 40, 41, claimedD("c", false))
	return r
}

func overlappingWork() *rec {
	r := newRec()
	r.work(1, "a", 1, 50)
	r.work(2, "b", 20, 60)
	return r
}

func pausedOwner() *rec {
	r := newRec()
	r.work(1, "a", 1, 300)
	r.h.AddFault(history.Fault{Client: 1, Key: key, Kind: history.FaultPause, Failpoint: "run.after-claim", Start: 2 * ms, End: 250 * ms})
	r.work(2, "b", 150, 160)
	return r
}

// serverTakeover is a takeover answered ret ms after the claim: inside
// the lease of a server-clock store before 95 ms.
func serverTakeover(ret int64) *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.work(1, "a", 1, 20)
	r.begin(2, "fp", ret-1, ret, claimedD("b", true))
	r.work(2, "b", ret, ret+10)
	return r
}

// takenOver is a claim taken over, whose stale owner's save is accepted
// or fenced.
func takenOver(fenced bool) *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.begin(2, "fp", 150, 151, claimedD("b", true))
	r.complete(1, "a", resp, 200, 201, fenced, false)
	return r
}

func tokenTwice() *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.release(1, "a", 2, 3, false)
	r.begin(2, "fp", 10, 11, claimedD("a", false))
	return r
}

// fenced is a claim and a takeover carrying fencing numbers n1 and n2.
func fenced(n1, n2 uint64) *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, fencedD("a", n1, false))
	r.begin(2, "fp", 150, 151, fencedD("b", n2, true))
	return r
}

// declaredFence reads a fencing number from a token "<n>:...".
func declaredFence(tk stores.Token) (uint64, bool) {
	var n uint64
	_, err := fmt.Sscanf(string(tk), "%d:", &n)
	return n, err == nil
}

func replayOfNothing() *rec {
	r := happy()
	r.begin(3, "fp", 30, 31, replayD(stores.Response{Status: 201, Body: "charged ch_9"}))
	return r
}

func differentAnswers() *rec {
	r := happy()
	r.answer(3, "fp", stores.Response{Status: 500, Body: "error"}, 40)
	return r
}

// twoLives is a key saved, pruned, claimed and saved again, its answers
// recorded out of order.
func twoLives() *rec {
	resp2 := stores.Response{Status: 201, Body: "charged ch_2"}
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.complete(1, "a", resp, 5, 6, false, false)
	r.op(0, models.Input{Kind: models.Prune, Now: t0.Add(30 * time.Millisecond)}, models.Output{}, 30, 31)
	r.begin(3, "fp", 40, 41, claimedD("c", false))
	r.complete(3, "c", resp2, 45, 46, false, false)
	r.answer(3, "fp", resp2, 46)
	r.answer(1, "fp", resp, 6)
	return r
}

func reuseAnswered(d stores.Decision) *rec {
	r := happy()
	r.begin(3, "fp-eur", 30, 31, d)
	return r
}

func spurious422() *rec {
	r := newRec()
	r.begin(3, "fp", 0, 1, mismatchD)
	return r
}

func takeoverOfOtherParameters() *rec {
	r := newRec()
	r.begin(1, "fp", 0, 50, claimedD("a", false))
	r.begin(2, "fp-eur", 10, 20, claimedD("b", true))
	return r
}

// twoFreshClaims is not linearizable, and porcupine's explanation of it
// names either claim (a whole run's check is not repeatable there): it
// serves where no explanation is given (out of time, interrupted).
func twoFreshClaims() *rec {
	r := newRec()
	r.begin(1, "fp", 0, 5, claimedD("a", false))
	r.begin(2, "fp", 1, 6, claimedD("b", false))
	return r
}

func staleInFlight() *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.begin(2, "fp", 500, 501, inFlightD)
	return r
}

// probed is a claim whose final probe answers d, after an unanswered
// probe when retried.
func probed(d stores.Decision, retried bool) *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	if retried {
		r.beginUnknown(probe, "fp", 200)
	}
	r.begin(probe, "fp", 3300, 3301, d)
	return r
}

// leakProbed is happy with a leak probe past the retention that answers d.
func leakProbed(d stores.Decision) *rec {
	r := happy()
	at := int64(model.Retention/time.Millisecond) + 20000 // ms, as rec's times
	r.op(0, models.Input{Kind: models.Prune, Now: t0.Add(time.Duration(at) * time.Millisecond)}, models.Output{}, at, at+1)
	r.begin(leakProbe, "leak", at+2, at+3, d)
	return r
}

// erring is a claim and n Begins told 409 while it is live, then
// errors Begins declared not applied.
func erring(n, errors int) *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	for i := range n {
		r.begin(2, "fp", int64(2+i/2), int64(2+i/2), inFlightD)
	}
	for i := range errors {
		r.beginNotApplied(10+i, "fp", int64(2+i), int64(3+i))
	}
	return r
}

// TestPartsMatchWhole: a run given in parts, each key's calls, work
// runs, answers and charges in one part and every Prune and fault in
// every part, is judged exactly as the whole run is (check.RunParts and
// check.Run: every checker's verdict, detail, count judged and
// violations), split into one, two, three parts and a part per key, on
// histories that make every checker pass and fail, and be unknown where
// it can. Keys are dealt to parts in turn, so the first part's first
// leak or error is not the run's first (by key), and a rate decided part
// by part differs from the run's.
func TestPartsMatchWhole(t *testing.T) {
	serverClock := model
	serverClock.Clock, serverClock.Slack = stores.ServerClock, check.ServerClockSlack
	perLife := model
	perLife.Semantics.FenceRestartsPerLife = true
	closed := make(chan struct{})
	close(closed)
	lp := leakProbe
	cases := []struct {
		name string
		recs []*rec
		ev   func(*check.Evidence)
		// assert, if set, checks the whole run's results.
		assert func(t *testing.T, whole []check.Result)
	}{
		{name: "healthy", recs: []*rec{happy(), pruned(), happy()},
			assert: func(t *testing.T, whole []check.Result) {
				for _, r := range whole {
					if r.Verdict != check.Pass {
						t.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Detail)
					}
				}
			}},
		{name: "charged twice, claimed again", recs: []*rec{happy(), doubleCharge(), claimedAgain(), doubleCharge()}},
		{name: "overlapping work, a paused owner", recs: []*rec{pausedOwner(), overlappingWork(), happy(), overlappingWork()}},
		{name: "takeovers inside a server clock's lease", recs: []*rec{serverTakeover(95), serverTakeover(94), happy(), serverTakeover(90)},
			ev: func(e *check.Evidence) { e.Model = serverClock }},
		{name: "stale writes, a token twice", recs: []*rec{takenOver(true), takenOver(false), tokenTwice(), happy()}},
		{name: "fencing numbers given", recs: []*rec{fenced(1, 2), fenced(3, 7), fenced(1, 2)}},
		{name: "fencing numbers given, one repeated", recs: []*rec{fenced(1, 2), fenced(2, 2), fenced(1, 2), fenced(5, 1)}},
		{name: "fencing numbers per life", recs: []*rec{fenced(1, 2), fenced(2, 1)}, ev: func(e *check.Evidence) { e.Model = perLife }},
		{name: "a declared fence", recs: []*rec{happy(), takenOver(true), happy()}, ev: func(e *check.Evidence) { e.Fence = declaredFence }},
		{name: "bad replays", recs: []*rec{twoLives(), replayOfNothing(), happy(), differentAnswers()}},
		{name: "mismatches", recs: []*rec{reuseAnswered(mismatchD), reuseAnswered(replayD(resp)), spurious422(), takeoverOfOtherParameters()}},
		{name: "not linearizable", recs: []*rec{happy(), claimedAgain(), staleInFlight(), happy(), staleInFlight()}},
		{name: "not linearizable, kept", recs: []*rec{happy(), staleInFlight(), happy(), claimedAgain()}, ev: func(e *check.Evidence) { e.Keep = true }},
		{name: "linearizable, kept", recs: []*rec{happy(), pruned(), happy()}, ev: func(e *check.Evidence) { e.Keep = true }},
		{name: "out of time", recs: []*rec{happy(), twoFreshClaims(), happy()}, ev: func(e *check.Evidence) { e.LinTimeout = time.Nanosecond }},
		{name: "interrupted", recs: []*rec{happy(), twoFreshClaims(), happy()}, ev: func(e *check.Evidence) { e.Done = closed }},
		{name: "stuck at the probe", recs: []*rec{probed(claimedD("p", true), true), probed(inFlightD, false), happy(), probed(inFlightD, true)}},
		{name: "no probe", recs: []*rec{staleInFlight(), overlappingWork(), tokenTwice()}},
		{name: "leaks, a finding", recs: []*rec{leakProbed(claimedD("z", false)), leakProbed(inFlightD), leakProbed(claimedD("y", true)), leakProbed(claimedD("x", false))},
			ev: func(e *check.Evidence) { e.LeakProbe = &lp },
			assert: func(t *testing.T, whole []check.Result) {
				if r := whole[7]; !strings.Contains(r.Finding(), "2 of 4 keys kept") || !strings.Contains(r.Detail, "order-o000-1 was still there") {
					t.Errorf("%s: %s", r.Verdict, r.Detail)
				}
			}},
		{name: "leaks, strict", recs: []*rec{leakProbed(claimedD("z", false)), leakProbed(inFlightD), leakProbed(claimedD("y", true))},
			ev: func(e *check.Evidence) { e.LeakProbe, e.StrictRetention = &lp, true }},
		{name: "no leak", recs: []*rec{leakProbed(claimedD("z", false)), leakProbed(claimedD("y", false))}, ev: func(e *check.Evidence) { e.LeakProbe = &lp }},
		{name: "unavailable, a finding", recs: []*rec{happy(), erring(2, 3), erring(0, 4), erring(1, 0)},
			assert: func(t *testing.T, whole []check.Result) {
				if r := whole[8]; !strings.Contains(r.Finding(), "7 of 11") || !strings.Contains(r.Detail, "Begin of t0/order-o000-1") {
					t.Errorf("%s: %s", r.Verdict, r.Detail)
				}
			}},
		{name: "unavailable, strict", recs: []*rec{happy(), erring(2, 3), erring(0, 4), erring(1, 0)},
			ev: func(e *check.Evidence) { e.StrictAvailability = true }},
		{name: "available in the whole though not in a part, strict", recs: []*rec{erring(0, 1), erring(180, 0)},
			ev: func(e *check.Evidence) { e.StrictAvailability = true },
			assert: func(t *testing.T, whole []check.Result) {
				if r := whole[8]; r.Verdict != check.Pass || r.Finding() != "" || r.Judged != 181 {
					t.Errorf("1 error in 181 Begins owed a 409: %s (judged %d): %s", r.Verdict, r.Judged, r.Detail)
				}
			}},
	}
	seen := map[string]map[check.Verdict]bool{}
	findings := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := joined(c.recs...)
			e := check.Evidence{Hist: r.h, Ledger: r.l, Model: model, ProbeClient: probe, LinTimeout: 10 * time.Second}
			if c.ev != nil {
				c.ev(&e)
			}
			whole := check.Run(e)
			for _, res := range whole {
				if seen[res.Checker] == nil {
					seen[res.Checker] = map[check.Verdict]bool{}
				}
				seen[res.Checker][res.Verdict] = true
				findings[res.Checker] = findings[res.Checker] || res.Finding() != ""
			}
			if c.assert != nil {
				c.assert(t, whole)
			}
			ops := len(r.h.Ops())
			for _, n := range []int{1, 2, 3, 0} {
				parts := splitByKey(r.h, r.l, n)
				pe := e
				pe.Hist, pe.Ledger = nil, nil // RunParts reads only the parts
				got := check.RunParts(pe, slices.Values(parts))
				if want := withoutDrawings(whole); !reflect.DeepEqual(withoutDrawings(got), want) {
					for i := range want {
						if !reflect.DeepEqual(withoutDrawings(got)[i], want[i]) {
							t.Errorf("%d parts: %s:\n got %+v\nwant %+v", len(parts), want[i].Checker, got[i], want[i])
						}
					}
				}
				lin, wholeLin := got[5], whole[5]
				switch {
				case !e.Keep:
					if lin.Linearization != nil {
						t.Errorf("%d parts: kept a drawing nobody asked for", len(parts))
					}
				case len(parts) == 1:
					if !sameDrawing(lin.Linearization, wholeLin.Linearization) {
						t.Errorf("one part: kept %+v, the whole run %+v", lin.Linearization, wholeLin.Linearization)
					}
				case lin.Verdict == check.Pass:
					if l := lin.Linearization; l == nil || !l.TooLarge || l.Ops != ops {
						t.Errorf("%d parts, passing: kept %+v; want the note that %d operations are too many to draw", len(parts), l, ops)
					}
				case lin.Verdict == check.Fail:
					if l := lin.Linearization; l == nil || l.TooLarge || l.Ops == 0 {
						t.Errorf("%d parts, failing: kept %+v; want the failing keys of the first part with one", len(parts), l)
					}
				}
			}
		})
	}
	for _, d := range check.Docs {
		if !seen[d.Name][check.Pass] || !seen[d.Name][check.Fail] {
			t.Errorf("%s: no case made it both pass and fail: %v", d.Name, seen[d.Name])
		}
	}
	for _, name := range []string{check.Liveness, check.Linearizable} {
		if !seen[name][check.Unknown] {
			t.Errorf("%s: no case left it unknown", name)
		}
	}
	for _, name := range []string{check.Retention, check.Availability} {
		if !findings[name] {
			t.Errorf("%s: no case made it a finding", name)
		}
	}
}

// TestPartsShareOneDeadline: the linearizability search has one deadline
// for the whole run, linCap LinTimeouts from the start of RunParts, not
// one per part: a part that comes after it has passed (here, its parts
// were slow to come) is undecided, though it would pass on a budget of
// its own.
func TestPartsShareOneDeadline(t *testing.T) {
	r := joined(happy(), happy())
	e := check.Evidence{Model: model, ProbeClient: probe, LinTimeout: 50 * time.Millisecond}
	slow := func(parts []check.Part, pause time.Duration) iter.Seq[check.Part] {
		return func(yield func(check.Part) bool) {
			for i, p := range parts {
				if i > 0 {
					time.Sleep(pause)
				}
				if !yield(p) {
					return
				}
			}
		}
	}
	// On time, with a budget no load reaches (50 ms, whose deadline is
	// 500 ms, a loaded CI machine could overrun with no pause at all).
	onTime := e
	onTime.LinTimeout = 5 * time.Second
	if got := check.RunParts(onTime, slow(splitByKey(r.h, r.l, 2), 0))[5]; got.Verdict != check.Pass {
		t.Fatalf("parts on time: %s: %s", got.Verdict, got.Detail)
	}
	got := check.RunParts(e, slow(splitByKey(r.h, r.l, 2), 600*time.Millisecond))[5]
	if got.Verdict != check.Unknown || got.Detail != "the check of 2 keys ran out of its 500ms" {
		t.Fatalf("parts past the run's deadline: %s: %s", got.Verdict, got.Detail)
	}
}
