package check

import (
	"cmp"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/models"
)

// mergeUnknowns returns one key's porcupine operations (part) with the
// unanswered Begins that nothing tells apart merged, and how many calls it
// left out. Each unanswered Begin may take effect at any moment after its
// call, so porcupine considers every subset of them at every point, and a
// key with dozens of them (a Postgres whose race losers all timed out, a
// lossy link) left it undecided past its budget. The reduction is exact:
// the history it returns is linearizable if and only if part is
// (docs/DESIGN.md §8, "Unanswered Begins"). In three steps:
//
//  1. Classes. An unanswered Begin's effect (models.Step) depends on its
//     fingerprint, its lease and its Now (the placeholder token is the
//     same for all: models.Placeholder), and its Now only through
//     comparisons with other times of the key (its own claim's times are
//     models.UnansweredAt of it): the creation times a
//     record can have (expiry at its own step), the decision times and
//     write times its lock time is compared with, and the times of every
//     call its creation time is compared with. Two calls whose Now
//     compares alike with every such time (the same signature, computed
//     with the model's own arithmetic) have the same effect from every
//     state, now and later.
//  2. One Now per class. Each call of a class takes the Now of the class's
//     first call. Every comparison the model makes stays as it was, and
//     the states they leave become equal, which porcupine's cache sees.
//  3. Enough calls per class. A class's calls are now identical but for
//     their call times, and their Step is idempotent: applying one twice
//     in a row reaches nothing that applying it once does not (the second
//     claim keeps the first's creation time and lock time; an expiry
//     then is one the first could make). So in a linearization, the
//     class's calls between two consecutive other calls of the key do no
//     more than one of them; the rest may as well do nothing, which an
//     unanswered call may (it moves to the end, where it never returns).
//     With m other calls there are m+1 such gaps, so m+1 calls of the
//     class suffice; and the earliest-called ones do, since a call
//     called earlier can stand wherever a later one stood (the j-th
//     used call, by call time, is called no earlier than the j-th
//     earliest of the class). Conversely, leaving calls out only removes
//     calls that may do nothing: a linearization of the rest is one of
//     the whole with them at the end.
func mergeUnknowns(m models.Config, part []porcupine.Operation) ([]porcupine.Operation, int) {
	var unknown []int
	for i, op := range part {
		if in, out := op.Input.(models.Input), op.Output.(models.Output); in.Kind == models.Begin && out.Unknown {
			unknown = append(unknown, i)
		}
	}
	if len(unknown) < 2 {
		return part, 0
	}
	t := criticalTimes(part)
	type class struct {
		fp    string
		lease time.Duration
		sig   string
	}
	classes := map[class][]int{}
	var order []class
	for _, i := range unknown {
		in := part[i].Input.(models.Input)
		c := class{in.Fingerprint, in.Lease, t.signature(m, in.Now, m.LeaseOf(in.Lease))}
		if _, ok := classes[c]; !ok {
			order = append(order, c)
		}
		classes[c] = append(classes[c], i)
	}
	drop := make([]bool, len(part))
	out := slices.Clone(part)
	left := len(part)
	for _, c := range order {
		members := classes[c]
		slices.SortStableFunc(members, func(a, b int) int { return cmp.Compare(part[a].Call, part[b].Call) })
		now := part[members[0]].Input.(models.Input).Now
		for _, i := range members {
			in := part[i].Input.(models.Input)
			in.Now = now
			out[i].Input = in
		}
		// left counts the calls still in, this class's included; the
		// others are left-len(members).
		keep := min(len(members), left-len(members)+1)
		for _, i := range members[keep:] {
			drop[i] = true
		}
		left -= len(members) - keep
	}
	kept := out[:0]
	for i, op := range out {
		if !drop[i] {
			kept = append(kept, op)
		}
	}
	return kept, len(part) - len(kept)
}

// keyTimes are the times of one key's calls that an unanswered Begin's
// Now is compared with by the model (see mergeUnknowns).
type keyTimes struct {
	created []time.Time // a record's possible creation times: claims' decisions, unanswered Begins' Nows
	decided []time.Time // answered Begins' decision times: a lock's age is judged at them
	writes  []time.Time // saves', releases' and extensions' times: a lease-bound lock's age
	at      []time.Time // every call's time (models.OpTime): a record's age is judged at them
}

func criticalTimes(part []porcupine.Operation) keyTimes {
	var t keyTimes
	for _, op := range part {
		in, out := op.Input.(models.Input), op.Output.(models.Output)
		t.at = append(t.at, models.OpTime(in, out))
		switch {
		case in.Kind == models.Begin && out.Unknown:
			t.created = append(t.created, models.UnansweredAt(in.Now))
		case in.Kind == models.Begin && out.Decided():
			t.decided = append(t.decided, out.Decision.DecidedAt)
			t.created = append(t.created, out.Decision.DecidedAt)
		case in.Kind == models.Complete || in.Kind == models.Release || in.Kind == models.Extend:
			t.writes = append(t.writes, in.Now)
		}
	}
	return t
}

// signature is how now compares with every time of t, in the model's own
// arithmetic (time.Time.Sub against the thresholds of models.Decide and
// models.Config's retention): two Nows with the same signature make every
// comparison of the model alike.
func (t keyTimes) signature(m models.Config, now time.Time, lease time.Duration) string {
	keep := m.Retention - m.Slack
	at := models.UnansweredAt(now) // the lock and creation time of the claim it may make
	b := make([]byte, 0, len(t.created)+2*len(t.decided)+len(t.writes)+len(t.at))
	bit := func(v bool) {
		if v {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
	}
	for _, c := range t.created {
		bit(now.Sub(c) >= keep) // a record made at c may expire at now
	}
	for _, d := range t.decided {
		age := d.Sub(at) // a lock taken at at, judged at d
		bit(age < lease-m.Slack)
		bit(age < m.LatestEnd(lease))
	}
	for _, w := range t.writes {
		bit(w.Sub(at) >= lease-m.Slack)
	}
	for _, a := range t.at {
		bit(a.Sub(at) >= keep) // a record made at at may expire at a
	}
	return string(b)
}
