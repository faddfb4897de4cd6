package scenario

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/lease"
)

// TestHeartbeatSaysWhenNoStalledOwnerWasTakenOver: on a lease store whose
// clock stands still, no lease ends, so no client takes a stalled owner's
// claim over, and the heartbeat scenario says that its late heartbeats and
// saves were not tested against a takeover, for every order; on the lease
// store with a running clock it says nothing.
func TestHeartbeatSaysWhenNoStalledOwnerWasTakenOver(t *testing.T) {
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Minute}
	stopped := time.Now()
	for _, clock := range []func() time.Time{func() time.Time { return stopped }, nil} {
		st, err := lease.New(cfg, clock)
		if err != nil {
			t.Fatal(err)
		}
		wantNote(t, notesOf(t, "heartbeat", st, cfg, 3, 2), "heartbeat: no client took the stalled owner's claim over", 2, clock != nil)
	}
}

// lateExtender is lateSecondBegin over a store that renews leases.
type lateExtender struct {
	*lateSecondBegin
	ext stores.Extender
}

func (s lateExtender) Extend(ctx context.Context, k stores.KeyRef, t stores.Token, now time.Time) error {
	return s.ext.Extend(ctx, k, t, now)
}

// TestHeartbeatSaysWhenNoClientMetTheWorkingOwner: on a store that
// answers every Begin of a key after the first only once the key's
// answer is saved, no other client meets the working owner's renewed
// claim, so the renewal was not tested, and the heartbeat scenario says
// so for every order; answering at once, it says nothing.
func TestHeartbeatSaysWhenNoClientMetTheWorkingOwner(t *testing.T) {
	// A lease of a second, renewed every third of it: the store holds
	// the others until the owner's save, which an owner whose lease ran
	// out never makes. At 100 ms a loaded suite's stalls ended leases
	// (CI rehearsals, 2026-12-06, evening): the saves were fenced, the
	// held Begins went at last, and some met a claim.
	cfg := stores.Config{LockTTL: time.Second, Retention: time.Minute}
	const what = "heartbeat: no other client's Begin came after the working owner's first LockTTL"
	for _, late := range []bool{true, false} {
		ls, err := lease.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var st stores.Store = ls
		if late {
			// Held up to the default 10 s: a held Begin let go by its
			// hold meets the owner if it is still working, and under
			// `make test` at six packages at once an owner worked past
			// the 2 s this test had held (CI rehearsal, 2026-12-06).
			st = lateExtender{newLateSecondBegin(ls, true, 0), ls}
		}
		notes := notesOf(t, "heartbeat", st, cfg, 3, 2)
		var mine string
		for _, n := range strings.Split(notes, "\n") {
			if strings.HasPrefix(n, what) {
				mine = n
			}
		}
		if late {
			wantNote(t, mine, what, 2, true)
		} else {
			wantNote(t, notes, what, 2, false)
		}
	}
}
