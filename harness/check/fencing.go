package check

import (
	"fmt"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// checkFencing proves [Fencing]: no token is handed out twice for a key,
// no save or release is accepted from a token another claim had
// superseded, and (with a declared [stores.Fence]) the fencing numbers of
// a key's claims increase.
func checkFencing(e Evidence, ops []history.Op, g grouped) Result {
	var vs []Violation
	keyed, order := g.keyed, g.order
	writes, fenced := 0, 0
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
		if e.Fence != nil {
			fenced += len(claims)
			vs = append(vs, monotonicFences(e.Fence, k, claims)...)
		}
		for _, w := range kops {
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
			for i := range claims {
				if claims[i].Output.Decision.Token == w.Input.Token && claims[i].Return <= w.Call {
					own = &claims[i]
				}
			}
			if own == nil {
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
	sortViolations(vs)
	detail := fmt.Sprintf("%d accepted writes, all from the current token; no token repeated", writes)
	if e.Fence != nil {
		detail += fmt.Sprintf("; the fencing numbers of %d claims increase", fenced)
	}
	return result(Fencing, vs, detail)
}

// monotonicFences checks a key's claims against the store's declared fence:
// every token carries a number, and a claim that began after another had
// answered carries a greater one (claims whose calls overlap may have
// been decided in either order, so they are not compared).
func monotonicFences(fence stores.Fence, k stores.KeyRef, claims []history.Op) []Violation {
	var vs []Violation
	nums := make([]uint64, len(claims))
	for i, c := range claims {
		n, ok := fence(c.Output.Decision.Token)
		if !ok {
			vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
				"client %d's token %s for %s carries no fencing number", c.Client, tok(c.Output.Decision.Token), k)})
			return vs
		}
		nums[i] = n
	}
	for i, a := range claims {
		for j, b := range claims {
			if a.Return < b.Call && nums[j] <= nums[i] {
				vs = append(vs, Violation{Fencing, k.String(), fmt.Sprintf(
					"fencing numbers of %s do not increase: client %d claimed with %d (token %s) at %s, then client %d with %d (token %s) at %s",
					k, a.Client, nums[i], tok(a.Output.Decision.Token), ms(a.Return), b.Client, nums[j], tok(b.Output.Decision.Token), ms(b.Return))})
				return vs
			}
		}
	}
	return vs
}
