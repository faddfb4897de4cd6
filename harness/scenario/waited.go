package scenario

import (
	"errors"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// waitedOnAClaim reports whether some Begin was called after another
// client's claim of its key was asked for and before its owner called its
// save or release, and was answered only once that save or release had
// returned, with the key's decision, not in flight: a store whose Begin
// waits for the claim's owner (a row lock, a lock polled) and then
// answers, or one slow to answer it. Such a Begin came while the claim
// was live, though it was decided once the claim was saved.
func waitedOnAClaim(h *history.History) bool {
	waited := false
	_ = h.EachPart(func(p *history.History) error {
		type live struct{ asked, saving, saved int64 }
		type end struct{ call, ret int64 }
		lives := map[stores.KeyRef][]live{}
		ops := p.Ops()
		ends := map[stores.Token]end{} // each token's save or release
		for _, op := range ops {
			if (op.Input.Kind == models.Complete || op.Input.Kind == models.Release) && op.Output.Decided() && !op.Output.Fenced {
				ends[op.Input.Token] = end{op.Call, op.Return}
			}
		}
		for _, op := range ops {
			if op.IsClaim() {
				if e, ok := ends[op.Output.Decision.Token]; ok {
					lives[op.Input.Key] = append(lives[op.Input.Key], live{op.Call, e.call, e.ret})
				}
			}
		}
		for _, op := range ops {
			if op.Input.Kind != models.Begin || !op.Output.Decided() || op.Output.Decision.Outcome == stores.InFlight || op.IsClaim() {
				continue
			}
			for _, l := range lives[op.Input.Key] {
				if op.Call > l.asked && op.Call < l.saving && op.Return > l.saved {
					waited = true
					return errWaited
				}
			}
		}
		return nil
	})
	return waited
}

// errWaited ends waitedOnAClaim's walk at its first find.
var errWaited = errors.New("a Begin waited on a live claim")

// ownerOf is the claim a takeover t (of ops, its key's calls) took over:
// the latest other claim of the key answered before t was asked for.
func ownerOf(ops []history.Op, t history.Op) (history.Op, bool) {
	var owner history.Op
	found := false
	for _, o := range ops {
		if o.IsClaim() && o.Return < t.Call && o.Output.Decision.Token != t.Output.Decision.Token && (!found || o.Return > owner.Return) {
			owner, found = o, true
		}
	}
	return owner, found
}

// takenEarly reports whether the takeover t (of ops, its key's calls) was
// answered sooner than half of ttl after the claim it took over was
// asked for: by any clock, that claim's lease had not run out.
func takenEarly(ops []history.Op, t history.Op, ttl time.Duration) bool {
	owner, found := ownerOf(ops, t)
	return found && t.Return-owner.Call < int64(ttl/2)
}
