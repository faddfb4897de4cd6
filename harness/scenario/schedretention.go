package scenario

import (
	"context"
	"strconv"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/sched"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// sched-retention's edge: on a manual clock its episodes land on the
// retention's boundary, one millisecond short of it, where a Prune must
// keep the record and a retry must be replayed (docs/DESIGN.md, "the
// boundary").

// RetentionEdge is the name of the scheduler action that moves a manual
// clock to one millisecond short of the episode's record's retention:
// offered once the key has a record (sched-retention), from then on every
// prune must keep it and every Begin must find it, so a store that prunes
// early (a creation time rounded to the second, a boundary judged a little
// before Retention) answers a retry there by running the work again.
const RetentionEdge = "clock to Retention-1ms"

// retentionEdge offers RetentionEdge in the episode of order k: once the
// key has a record, the manual clock may move to one millisecond short of
// its retention, counted from the latest claim that made a record (a
// claim that was not a takeover: a takeover keeps the record's creation
// time). Before that moment the record must stay (models.PastRetention:
// Slack is 0 on a manual clock), so a Prune then keeps it and a retry is
// replayed; a store whose prune comes early, by a millisecond or by a
// rounded second, deletes it, and the retry (or the runner's final probe)
// claims the key again.
func (e *Env) retentionEdge(s *sched.Scheduler, m *faults.ManualClock, k int, from history.Mark) {
	key := e.Order(k, "").Key
	s.ActionWhen(RetentionEdge, 1, func() bool {
		at, ok := e.created(key, from)
		return ok && m.Now().Before(at.Add(e.Config.Retention-time.Millisecond))
	}, func() { e.toRetentionEdge(m, key, from) })
}

// retentionCoda ends an episode of order k (key 0 and every third: every
// run has one) on the retention's edge, whatever the chooser did: the
// clock moves to one millisecond short of the record's retention (unless
// it is there or past it), a Prune runs, and a new client sends the order
// again: the record must still be there, so the retry is replayed (the
// runner's final probe comes after the clock moved past the retention,
// where the record may be gone). It returns what it did, for the
// episode's log.
func (e *Env) retentionCoda(ctx context.Context, m *faults.ManualClock, k int, from history.Mark) []sched.Event {
	o := e.Order(k, "")
	if !e.toRetentionEdge(m, o.Key, from) {
		return nil
	}
	_, _ = e.Recorder(e.NewClientID(), e.Store, e.clock).Prune(ctx, m.Now())
	c := e.NewClient()
	c.WorkTime, c.Backoff, c.MaxBackoff = 0, 0, 1
	c.Submit(ctx, o)
	return []sched.Event{{Kind: sched.Acted, Action: RetentionEdge + ", a Prune, then c" + strconv.Itoa(c.ID) + " sends the order again"}}
}

// created is when the record of key last made by a claim (not a takeover:
// a takeover keeps the record's creation time) recorded since from was
// made.
func (e *Env) created(key stores.KeyRef, from history.Mark) (time.Time, bool) {
	var at time.Time
	found := false
	e.Hist.HasSince(from, func(op history.Op) bool { // a scan: it never matches
		if op.Input.Key == key && op.Input.Kind == models.Begin && op.Output.Decided() &&
			op.Output.Decision.Outcome == stores.Claimed && !op.Output.Decision.Takeover && op.Output.Decision.DecidedAt.After(at) {
			at, found = op.Output.Decision.DecidedAt, true
		}
		return false
	})
	return at, found
}

// toRetentionEdge moves the manual clock to one millisecond short of the
// retention of key's record (see created), and reports whether the clock
// is there now.
func (e *Env) toRetentionEdge(m *faults.ManualClock, key stores.KeyRef, from history.Mark) bool {
	at, ok := e.created(key, from)
	if !ok {
		return false
	}
	d := at.Add(e.Config.Retention - time.Millisecond).Sub(m.Now())
	if d > 0 {
		m.Advance(d)
	}
	return d >= 0
}
