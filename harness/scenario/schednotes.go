package scenario

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/sched"
)

// What a scheduled scenario's episodes say about how well they explored
// the store, from their records: notes for a pass, not violations.

// insideStops counts the stops of an episode's log at failpoints inside a
// store's calls: every failpoint but the Run flow's (faults.RunAfterClaim
// …), which lie between calls.
func insideStops(log []sched.Event) int {
	n := 0
	for _, e := range log {
		if e.Kind == sched.Parked && e.Failpoint != "" && e.Failpoint != prunerStop && !strings.HasPrefix(e.Failpoint, "run.") {
			n++
		}
	}
	return n
}

// BetweenCallsOnly says, when a scheduled scenario's episodes all stopped
// only between store calls, that they could not interleave clients inside
// one: a store that passes no failpoint (faults.Hit) inside its calls gets
// no race within a call explored (a SELECT then an INSERT), and its pass
// says so. "" when some episode stopped inside a call, or none ran.
func BetweenCallsOnly(eps []EpisodeRecord) string {
	if len(eps) == 0 {
		return ""
	}
	for _, e := range eps {
		if e.Inside > 0 {
			return ""
		}
	}
	return "interleaved only between store calls: the store passed no failpoint inside its calls (faults.Hit before each round trip), or its process died before it reached one, so no race inside one call (a read then a write) was explored"
}

// blockedStops counts the times an episode's client was taken to be
// blocked inside the store (sched.Blocked).
func blockedStops(log []sched.Event) int {
	n := 0
	for _, e := range log {
		if e.Kind == sched.Blocked {
			n++
		}
	}
	return n
}

// UnannouncedWaits says, for a store that declares it announces its
// waits (stores.Backend.WaitsAnnounced, idemtest.Factory.WaitsAnnounced),
// when its clients were nonetheless taken to be blocked inside it: each
// time, the scheduler waited announcedBlock for a client that reached no
// failpoint. Either the machine was that slow, or the store waits for
// another client (a lock) without calling faults.Wait, and the
// declaration is wrong: a wrong one costs time, never a verdict, and it
// made a suite many times slower with nothing said. "" when no client
// blocked, or the store does not declare it.
func UnannouncedWaits(eps []EpisodeRecord, declared bool) string {
	n := 0
	for _, e := range eps {
		n += e.Blocked
	}
	if !declared || n == 0 {
		return ""
	}
	return fmt.Sprintf("a client ran %v inside a store call without reaching a failpoint %d time(s), the bound for a store that declares "+
		"it announces its waits (WaitsAnnounced): each cost that wait. Either the machine was that slow, or the store waits for another "+
		"client (a lock) without calling faults.Wait and the declaration is wrong (after %d, the scenario's later episodes no longer trusted it)", announcedBlock, n, announcedDistrust)
}

// ClockOutran says, for a server-clock store, when an episode ran as long
// as LockTTL of real time between two of the clock's ticks
// (EpisodeRecord.Unticked): a claim made in that stretch may have gone
// stale by the server's clock rather than a tick, so the interleaving was
// the machine's as well as the seed's, and a replay of the episode may
// take another path. The verdict stands: the
// checkers judge a claim's age by when its calls ran. "" when no episode
// outran, or the store's clock is the harness's (Unticked is 0).
func ClockOutran(eps []EpisodeRecord, lockTTL time.Duration) string {
	n, longest := 0, time.Duration(0)
	for _, e := range eps {
		if e.Outran(lockTTL) {
			n++
			longest = max(longest, e.Unticked)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d episode(s) ran up to %v of real time between the clock's ticks, past LockTTL (%v): a claim made there may "+
		"have gone stale by the server's clock rather than a tick, so those interleavings are the machine's as well as the seed's "+
		"(a replay may take another path; the verdict stands)", n, len(eps), longest.Round(time.Millisecond), lockTTL)
}

// Outran reports whether the episode ran as long as lockTTL of real time
// between two of the clock's ticks (ClockOutran).
func (e EpisodeRecord) Outran(lockTTL time.Duration) bool { return e.Unticked >= lockTTL }

// tookOver reports whether some Begin of ops claimed a key over a stale
// claim ([stores.Decision.Takeover]): sched-takeover passed on seeds
// whose episodes took none over, and said nothing of what it was named
// for.
func tookOver(ops []history.Op) bool {
	for _, op := range ops {
		if op.IsClaim() && op.Output.Decision.Takeover {
			return true
		}
	}
	return false
}
