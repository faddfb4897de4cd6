package scenario

import (
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// TestAClaimAfterAPruneMeetsTheOwner: with a retention shorter than the
// LockTTL, the pruner removes a paused or crashed owner's record while
// its claim is still held (the store may: a record may be gone once it is
// Retention old), and the next client claims the key afresh, not as a
// takeover. The owner's late save or release then meets another owner as
// surely as after a takeover, so the takeover and crash scenarios say
// nothing was missed; they once said no client took the claim over, and
// the takeover scenario's owner slept its full ten LockTTLs (at
// --lock-ttl 30s with the default retention, five minutes per run).
func TestAClaimAfterAPruneMeetsTheOwner(t *testing.T) {
	cfg := stores.Config{LockTTL: 400 * time.Millisecond, Retention: 50 * time.Millisecond}
	for _, name := range []string{"takeover", "crash"} {
		st, err := memory.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if notes := notesOf(t, name, st, cfg, 3, 4); notes != "" {
			t.Errorf("%s: every owner's key was claimed again after a prune, but the notes say %q", name, notes)
		}
	}
}
