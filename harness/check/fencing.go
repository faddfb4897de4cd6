package check

import (
	"fmt"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// checkFencing proves [Fencing]: no token is handed out twice for a key,
// no save or release is accepted from a token another claim had
// superseded, and (with a declared [stores.Fence], or numbers the store
// gives as [stores.Decision.Fence]) the fencing numbers of a key's claims
// increase.
//
// Fences are on when the store declares a Fence, or gives a number on
// any claim of the run: of the part's own claims (fencesGiven), or of any
// part's (Evidence.FencesGiven, which whoever cut the run into parts
// says, since a part may hold no claim that gives one). The numbers are
// compared only within a key, and a key is in one part.
func checkFencing(e Evidence, ops []history.Op, g grouped) fencingTally {
	var vs []Violation
	keyed, order := g.keyed, g.order
	writes, fenced, rejected := 0, 0, 0
	fenceOn := e.Fence != nil || e.FencesGiven || fencesGiven(ops)
	for _, k := range order {
		kops := keyed[k]
		var claims []history.Op
		seen := map[stores.Token]history.Op{}
		for _, op := range kops {
			if !op.IsClaim() {
				continue
			}
			tok := op.Output.Decision.Token
			if prev, dup := seen[tok]; dup {
				vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
					"token %s handed out twice for %s: to client %d at %s and to client %d at %s",
					tok, k, prev.Client, ms(prev.Return), op.Client, ms(op.Return))})
			}
			seen[tok] = op
			claims = append(claims, op)
		}
		if fenceOn {
			fenced += len(claims)
			vs = append(vs, monotonicFences(e, k, kops, claims, g.prunes)...)
		}
		for _, w := range kops {
			if w.Output.Fenced && (w.Input.Kind == models.Complete || w.Input.Kind == models.Release || w.Input.Kind == models.Extend) {
				rejected++
			}
			if !w.Accepted(models.Complete) && !w.Accepted(models.Release) {
				continue
			}
			// A quiet release answers ok whether or not it was the
			// owner's; whether it deleted another's claim shows in what
			// the key answers next (linearizability).
			if w.Input.Kind == models.Release && e.Model.Semantics.QuietRelease {
				continue
			}
			writes++
			// the write's own claim: the latest claim with its token before it
			var own *history.Op
			handedOut := false // by any claim of the key, whenever
			for i := range claims {
				if claims[i].Output.Decision.Token == w.Input.Token {
					handedOut = true
					if claims[i].Return <= w.Call {
						own = &claims[i]
					}
				}
			}
			if own == nil {
				// A token no claim of the key handed out (empty, made
				// up, another key's: abuse sends them) cannot be the
				// owner's; a store that took it is not fenced. One a
				// claim gave only later is left to linearizability.
				if !handedOut {
					vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
						"%s by client %d with token %s was accepted at %s, but no claim of %s had that token: the store took a write from a token it never handed out for the key",
						w.Input.Kind, w.Client, tokOrEmpty(w.Input.Token), ms(w.Return), k)})
				}
				continue
			}
			for _, c := range claims {
				if c.Output.Decision.Token != w.Input.Token && c.Call > own.Return && c.Return < w.Call {
					vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
						"%s by client %d with token %s was accepted at %s, but client %d had taken %s over with token %s at %s",
						w.Input.Kind, w.Client, tok(w.Input.Token), ms(w.Return), c.Client, k, tok(c.Output.Decision.Token), ms(c.Return))})
					break
				}
			}
		}
	}
	return fencingTally{writes: writes, fenced: fenced, rejected: rejected, fenceOn: fenceOn, vs: vs}
}

// tokOrEmpty is [tok], or "(empty)" for the empty token.
func tokOrEmpty(t stores.Token) string {
	if t == "" {
		return "(empty)"
	}
	return tok(t)
}

// fencingTally is what checkFencing found in a part, or in the parts
// merged so far: the accepted writes judged, the claims whose fencing
// numbers were judged, whether fences were on, and the violations.
type fencingTally struct {
	writes, fenced int
	rejected       int // writes the store fenced: it met stale or forged tokens
	fenceOn        bool
	vs             []Violation
}

// add merges o, the next part's tally, into t.
func (t *fencingTally) add(o fencingTally) {
	t.writes += o.writes
	t.fenced += o.fenced
	t.rejected += o.rejected
	t.fenceOn = t.fenceOn || o.fenceOn
	t.vs = append(t.vs, o.vs...)
}

// decide is the [Fencing] result of a run's merged tally.
func (t fencingTally) decide(e Evidence) Result {
	sortViolations(t.vs)
	detail := fmt.Sprintf("%d accepted writes, all from the current token; no token repeated", t.writes)
	// What it faced: a pass beside 3,280 stale saves fenced read as one
	// beside none.
	if t.rejected > 0 {
		detail += fmt.Sprintf("; %d writes with a stale or forged token fenced", t.rejected)
	} else {
		detail += "; no write was fenced (no stale or forged token met)"
	}
	if t.fenceOn {
		detail += fmt.Sprintf("; the fencing numbers of %d claims increase", t.fenced)
		if e.Model.Semantics.FenceRestartsPerLife {
			detail += " within each life of their record"
		}
	}
	return judged(result(Fencing, t.vs, detail), t.writes)
}

// fencesGiven reports whether the store gave a fencing number as a field
// of any claim (stores.Decision.Fence): a store that gives them is held to
// them on every claim, as one that declares a stores.Fence is.
func fencesGiven(ops []history.Op) bool {
	for _, op := range ops {
		if op.IsClaim() && op.Output.Decision.Fence != 0 {
			return true
		}
	}
	return false
}

// monotonicFences checks a key's claims against the store's fence (its
// declared stores.Fence, or the numbers its decisions carry: see
// stores.FenceOf): every claim carries a number, and a claim that began
// after another had answered carries a greater one (claims whose calls
// overlap may have been decided in either order, so they are not
// compared). A store that declares FenceRestartsPerLife may start lower
// once retention may have removed the key's record between the two
// claims (newLifeBetween); without the declaration, a violation that it
// would allow says so.
func monotonicFences(e Evidence, k stores.KeyRef, kops, claims []history.Op, prunes []history.Op) []Violation {
	var vs []Violation
	nums := make([]uint64, len(claims))
	for i, c := range claims {
		n, ok := stores.FenceOf(e.Fence, c.Output.Decision)
		if !ok {
			vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
				"client %d's token %s for %s carries no fencing number", c.Client, tok(c.Output.Decision.Token), k)})
			return vs
		}
		nums[i] = n
	}
	born, _ := firstPossibleClaim(kops)
	perLife := e.Model.Semantics.FenceRestartsPerLife
	for i, a := range claims {
		for j, b := range claims {
			if a.Return >= b.Call || nums[j] > nums[i] {
				continue
			}
			newLife := newLifeBetween(e.Model, born, a, b, prunes)
			if perLife && newLife {
				continue // b began a new life of the record
			}
			why := ""
			switch {
			case perLife:
				why = fmt.Sprintf(", and retention (%v) cannot have removed its record in between: it was younger than that when the second claim was decided, and no prune after the first claim found it older", e.Model.Retention)
			case newLife:
				why = "; retention may have removed the record in between: if the store's fence restarts with each life of a record, declare stores.Semantics{FenceRestartsPerLife: true}"
			}
			vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
				"fencing numbers of %s do not increase: client %d claimed with %d (token %s) at %s, then client %d with %d (token %s) at %s%s",
				k, a.Client, nums[i], tok(a.Output.Decision.Token), ms(a.Return), b.Client, nums[j], tok(b.Output.Decision.Token), ms(b.Return), why)})
			return vs
		}
	}
	return vs
}

// newLifeBetween reports whether retention may have removed a key's
// record after claim a and before claim b was decided, so that b may have
// begun a new life of it. It is mayBeExpired, the one retention judgement
// the checkers share, from born (the key's first possible claim: the
// earliest its record can have been made, since a life spans releases and
// re-claims), with only the prunes that may have acted after a's decision
// (its record existed from then on; a prune before it removed an older
// one).
func newLifeBetween(m models.Config, born, a, b history.Op, prunes []history.Op) bool {
	var after []history.Op
	for _, p := range prunes {
		if p.Return >= a.Call {
			after = append(after, p)
		}
	}
	return mayBeExpired(m, born, b, after)
}
