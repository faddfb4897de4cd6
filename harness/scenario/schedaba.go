package scenario

import (
	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/sched"
)

// abaSteps is the scripted start of an ABA episode (episodeSpec.aba) of
// clients names: an owner, a client with other parameters, and a taker
// with the owner's. A uniform choice at every step reached this shape
// about once in 250 episodes, too rarely for a run of a few keys:
//
//  1. the owner claims and stops before its work;
//  2. the clock moves past LockTTL: its claim is stale;
//  3. the taker reads the stale claim and stops between that read and
//     the write that depends on it (faults.BeginAfterSelect), or, on a
//     store that decides in one step, takes the claim over;
//  4. the owner's work fails and it releases its claim (fenced, if the
//     taker took it over), then stops before its next Begin;
//  5. the client with other parameters claims the key (the row is gone),
//     or is told 422 (the taker holds it);
//  6. the clock moves past LockTTL again: that claim is stale too (on a
//     caller-clock store the taker's write judges by the time its call
//     began, before this tick: there the client with other parameters has
//     a clock behind by LockTTL, and its claim is stale when made);
//  7. the taker writes.
//
// The row the taker read is gone and another is in its place, in the same
// state (in flight, stale): a store whose write re-checks the row's state
// and not its identity (a token, a version) takes over the other
// parameters' claim, and answers the taker "claimed" where the decision
// table says 422. The chooser picks every later step.
func abaSteps(names []string) []sched.Step {
	owner, other, taker := names[0], names[1], names[2]
	return []sched.Step{
		{Client: owner, Until: []string{faults.RunAfterClaim}},
		{Action: Tick},
		{Client: taker, Until: []string{faults.BeginAfterSelect, faults.RunAfterClaim}},
		{Client: owner, Until: []string{faults.RunBeforeBegin}},
		{Client: other, Until: []string{faults.RunAfterClaim}},
		{Action: Tick},
		{Client: taker, Until: []string{faults.RunAfterClaim}},
	}
}
