package idemtest

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	"pgregory.net/rapid"
)

// fenceLife is what checkFence keeps of a key: its last claim, and the
// life of the key's record that claim belongs to.
type fenceLife struct {
	client int
	token  stores.Token
	n      uint64
	at     time.Time
	// born is when the life's first claim was decided, the earliest its
	// record (or its counter) can have been made: a life spans releases
	// and re-claims.
	born time.Time
	// mayEnd: retention may have removed the record since the last claim
	// (an operation on the key came at least the retention after born).
	mayEnd bool
}

// checkFence holds a store that declares a fence, or gives its numbers as
// fields of its claims, to it: each claim of a key carries a greater
// number than the last (the calls here are one at a time, so every claim
// follows the last). With FenceRestartsPerLife, a claim may start lower
// once retention may have removed the record, by the model's retention
// boundary (models.Config.PastRetention) at some operation since the
// last claim or at this one; that claim begins a new life.
func (d *driver) checkFence(rt *rapid.T, client int, in models.Input, out models.Output) {
	k, dec := in.Key, out.Decision
	if dec.Fence != 0 {
		d.fencesGiven = true
	}
	n, ok := stores.FenceOf(d.fence, dec)
	if !ok {
		if d.fence == nil && !d.fencesGiven {
			return // the store gives no fence
		}
		rt.Fatalf("fencing: client %d's claim of %s (token %q) carries no fencing number\n  history of the key:\n    %s",
			client, k, dec.Token, strings.Join(d.history[k], "\n    "))
	}
	at := models.OpTime(in, out)
	l := d.fences[k]
	switch {
	case l == nil:
		l = &fenceLife{born: at}
		d.fences[k] = l
	case n <= l.n:
		ended := l.mayEnd || d.times.cfg.PastRetention(l.born, at)
		perLife := d.times.cfg.Semantics.FenceRestartsPerLife
		if !perLife || !ended {
			why := ""
			switch {
			case perLife:
				why = fmt.Sprintf("\n  its record's life began at %s, less than the retention (%v) before, so neither a prune nor the store's expiry can have ended it",
					d.stamp(l.born), d.times.cfg.Retention)
			case ended:
				why = "\n  retention may have removed the record in between: if your store's fence restarts with each life of a record, " +
					"declare stores.Semantics{FenceRestartsPerLife: true}"
			}
			rt.Fatalf("fencing: client %d's claim of %s at %s (token %s) carries fencing number %d, not above %d, the number of the claim before it: client %d's at %s (token %s)%s\n  history of the key:\n    %s",
				client, k, d.stamp(at), faults.ShortToken(string(dec.Token)), n, l.n, l.client, d.stamp(l.at), faults.ShortToken(string(l.token)), why,
				strings.Join(d.history[k], "\n    "))
		}
		l.born = at // a new life
	}
	l.client, l.token, l.n, l.at, l.mayEnd = client, dec.Token, n, at, false
}
