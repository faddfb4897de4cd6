package scenario

import (
	"cmp"
	"slices"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// unraced returns the orders (by key, ks) no two of whose Begins were in
// the store at once in env's history, each call from its Call to its
// Return (to its error, for one whose outcome is unknown): the key's
// clients came one after the other, and it was not raced, whatever a
// rendezvous saw. A store that passes no failpoint in its calls (an
// in-memory store written elsewhere) is never held at the rendezvous
// inside it, and a check-then-insert race in it passed race saying the
// key was raced.
func unraced(env *Env, ks map[stores.KeyRef]string) []string {
	if len(ks) == 0 {
		return nil
	}
	spans := map[stores.KeyRef][][2]int64{}
	_ = env.Hist.EachPart(func(p *history.History) error {
		for _, op := range p.Ops() {
			if _, ok := ks[op.Input.Key]; !ok || op.Input.Kind != models.Begin {
				continue
			}
			end := op.Return
			if end == history.Never {
				end = max(op.ErrAt, op.Call)
			}
			spans[op.Input.Key] = append(spans[op.Input.Key], [2]int64{op.Call, end})
		}
		return nil
	})
	var out []string
	for k, id := range ks {
		s := spans[k]
		slices.SortFunc(s, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
		overlapped, until := false, int64(-1)
		for _, sp := range s {
			if sp[0] < until {
				overlapped = true
				break
			}
			until = max(until, sp[1])
		}
		if !overlapped {
			out = append(out, id)
		}
	}
	return out
}
