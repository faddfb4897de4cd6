package idemtest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// WaitBudget is the longest a scenario may wait in real time for LockTTLs
// and retention periods to pass (harness.Options.ScenarioWaits) before
// the suite skips it instead, saying what it did not exercise: a store
// that declares a lease of minutes (Factory.LockTTL) is not held up that
// long, and a scenario cut short by its own waits would judge nothing.
// At the suite's own LockTTL and retention every scenario is far below
// it.
const WaitBudget = time.Minute

// overBudget says why sc is not run on the factory's store, when its
// waits at the store's LockTTL and retention are past WaitBudget; ""
// when they are not.
func overBudget(f Factory, sc scenario.Scenario) string {
	o := options(f)
	w := o.ScenarioWaits(sc)
	if w <= WaitBudget {
		return ""
	}
	return fmt.Sprintf("scenario %s not exercised: at %s it waits about %v in real time (its pauses past LockTTL, its final probe, its retention waits), past the suite's wait budget of %v (idemtest.WaitBudget)",
		sc.Name, declaredTimes(f, o.LockTTL, o.Retention), w.Round(time.Second), WaitBudget)
}

// cutAt is how long a scenario may run on the factory's store before
// the suite cuts it (0: never). At a lease longer than the wait budget
// the final probe does not wait it out (harness.Options.ProbeWait) and
// the scenarios that run wait for nothing by design; but their clients
// back off on a claim still held (one whose save failed), up to its
// lease. Such a run is cut at three wait budgets, and what it could not
// judge is said (a skip), not waited for.
func cutAt(f Factory, sc scenario.Scenario) time.Duration {
	if options(f).LockTTLFor(sc) <= WaitBudget {
		return 0
	}
	return cutAfter
}

// cutAfter is cutAt's cut (a variable for the package's own tests).
var cutAfter = 3 * WaitBudget

// declaredTimes names the LockTTL and retention a run uses, and which of
// them the factory declared.
func declaredTimes(f Factory, ttl, retention time.Duration) string {
	s := fmt.Sprintf("LockTTL %v", ttl)
	if f.LockTTL > 0 {
		s += " (Factory.LockTTL)"
	}
	s += fmt.Sprintf(" and retention %v", retention)
	if f.Retention > 0 {
		s += " (Factory.Retention)"
	}
	return s
}

// openHint adds to an error of a scenario's run the hint of
// declaredHint, when it has one, on a line of its own.
func openHint(f Factory, err error) error {
	return fmt.Errorf("%w%s", err, declaredHintLine(f, err.Error()))
}

// declaredHintLine is declaredHint on a line of its own, or "".
func declaredHintLine(f Factory, msg string) string {
	if h := declaredHint(f, msg); h != "" {
		return "\n(" + h + ")"
	}
	return ""
}

// declaredHint says, for an error opening or setting up a scenario's
// store when the factory declared no lease, that a store refusing the
// suite's LockTTL or retention (one that will not take a lease under a
// second) should declare the one it keeps; "" for an error that names a
// server it could not reach, which no declaration mends (a Redis that
// was down got the hint).
func declaredHint(f Factory, msg string) string {
	if f.LockTTL > 0 && f.Retention > 0 || unreachable(msg) {
		return ""
	}
	o := options(f)
	return fmt.Sprintf("if the store refused the LockTTL %v or the retention %v the suite gave it in stores.Config because it keeps its own, declare them: idemtest.Factory.LockTTL, idemtest.Factory.Retention", o.LockTTL, o.Retention)
}

// unreachable reports whether an error's text says a server could not be
// reached (refused, unknown, timed out, reset).
func unreachable(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range []string{"connection refused", "no such host", "i/o timeout", "connection reset", "dial tcp", "dial unix", "network is unreachable", "timeout expired"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// leaseHint says, for a scenario that failed or could not decide, what
// the store's answers show of its lease: plainly, a lease its claims
// reported (stores.Decision.LeaseUntil) that is not the one the suite
// gave it; else, where a check that rests on the lease failed (a Begin
// answered in flight that the model forbids, a key still in flight at
// the final probe), that a store keeping a longer lease of its own
// answers so, and that a store that does not has kept a claim past its
// lease. Where the factory declared its lease, only a lease longer than
// it is said, with what a clock counting in whole seconds declares
// ([clockStepHint]): such a store failed with nothing to declare. ""
// when none applies.
func leaseHint(f Factory, s *results.ScenarioResult) string {
	ttl := time.Duration(s.LockTTL)
	said, ok, spread := harness.LeaseSaid(s)
	late := slices.ContainsFunc(s.Violations, func(v check.Violation) bool {
		return v.Checker == "liveness" || v.Checker == "linearizability" && strings.Contains(v.Detail, "→ in-flight")
	})
	step := clockStepHint(f.Semantics)
	if f.LockTTL > 0 {
		switch {
		case step == "":
		case ok && said > ttl:
			return fmt.Sprintf("the store reports a lease of %v on its claims (Decision.LeaseUntil), longer than the LockTTL %v it declared (idemtest.Factory.LockTTL)%s", said, ttl, step)
		case spread[1] > ttl:
			return fmt.Sprintf("the store's claims report leases from %v to %v (Decision.LeaseUntil less Decision.DecidedAt), up to longer than the LockTTL %v it declared (idemtest.Factory.LockTTL)%s", spread[0], spread[1], ttl, step)
		case late:
			return fmt.Sprintf("some of these failures are a Begin answered in flight, or a key still in flight, past the LockTTL %v the store declared (idemtest.Factory.LockTTL)%s; if not, it kept a claim past its lease", ttl, step)
		}
		return ""
	}
	if ok {
		return fmt.Sprintf("the store reports a lease of %v on its claims (Decision.LeaseUntil), not the LockTTL %v the suite gave it in stores.Config: it keeps a lease of its own; declare it, idemtest.Factory{LockTTL: %v}, and the suite judges it at that lease", said, ttl, said)
	}
	if spread[1] > 0 {
		return fmt.Sprintf("the store's claims report leases from %v to %v (Decision.LeaseUntil less Decision.DecidedAt), not the LockTTL %v the suite gave it in stores.Config, nor any one lease: a DecidedAt read apart from the lease's start (another statement, a SELECT before the INSERT, another clock) reads so%s", spread[0], spread[1], ttl, step)
	}
	if late {
		return fmt.Sprintf("some of these failures are a Begin answered in flight, or a key still in flight, past the LockTTL %v the suite gave the store in stores.Config: if the store keeps a longer lease of its own, whatever stores.Config.LockTTL says, declare it (idemtest.Factory.LockTTL) and the suite judges it at that lease%s; if it does neither, it kept a claim past its lease", ttl, step)
	}
	return ""
}

// clockStepHint is what a lease hint adds for a store that declared no
// clock step (stores.Semantics.ClockStep): a store whose clock counts in
// whole seconds holds each claim up to a second past its lease, and
// declares it so. "" for one that declared it.
func clockStepHint(sem stores.Semantics) string {
	if sem.ClockStep > 0 {
		return ""
	}
	return "; if its clock counts in whole seconds (lock times kept as unix seconds, a lock set with Redis's EX), holding a claim up to a second past its lease and never less, declare that: stores.Semantics{ClockStep: time.Second}"
}
