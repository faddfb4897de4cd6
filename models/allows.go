package models

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// Allows says, for a failure message, what the decision table ([Decide])
// allows a Begin at its time ([OpTime]) in state s: the answer in each
// state the key may be in by then ([Step]'s, retention's removal
// included), and, where retention cannot have removed the record yet,
// its age against the retention (a store author whose claim the model
// refused read models/model.go to learn what it had expected). Empty
// for any other call.
func Allows(cfg Config, s State, in Input, out Output) string {
	if in.Kind != Begin || out.Unknown || out.NotApplied {
		return ""
	}
	now := OpTime(in, out)
	var alts []string
	for _, pre := range cfg.beforeOp(s, now) {
		e := describeExpected(cfg, pre, Decide(cfg, pre, in.Fingerprint, now), now)
		if !pre.Exists && s.Exists {
			e = "with the record removed by retention, " + e
		}
		alts = append(alts, e)
	}
	why := ""
	if s.Exists && !cfg.mayBeExpired(s, now) {
		why = fmt.Sprintf("; the record, created at %s (%v before), is inside the retention of %v: no prune or expiry may have removed it yet",
			s.CreatedAt.Format("15:04:05.000"), now.Sub(s.CreatedAt).Round(time.Millisecond), cfg.Retention)
	}
	if d := out.Decision; d.Outcome == stores.Claimed && (d.Token == "" || s.usedToken(d.Token)) {
		// The outcome may be one allowed: the token is what was not (a
		// store whose takeover kept the owner's token read "allows:
		// claimed" of its own claimed answer, and never why).
		why += fmt.Sprintf("; but a claim's token must be new for the key, and %s", tokenSaid(d.Token))
	}
	return "the decision table allows at " + now.Format("15:04:05.000") + ": " + strings.Join(alts, "; or, ") + why
}

// tokenSaid says what is wrong with a claim's token: none, or one the key
// had been handed before.
func tokenSaid(t stores.Token) string {
	if t == "" {
		return "this claim carries none"
	}
	return fmt.Sprintf("token %s was handed out for it before", short(string(t)))
}

// describeExpected prints one row of the decision table as its answer,
// with the lease arithmetic behind an in-flight claim's.
func describeExpected(cfg Config, s State, e Expected, now time.Time) string {
	switch {
	case e.Outcome == stores.Replay:
		return fmt.Sprintf("replay %d %q", e.Response.Status, short(e.Response.Body))
	case e.Outcome == stores.Claimed && e.EitherClaim:
		return "claimed (a takeover or not: a released key's record reclaimed)"
	case e.Outcome == stores.Claimed && e.Takeover && e.Ambiguous:
		return fmt.Sprintf("claimed (takeover) or in-flight (the claim is %v old, its lease %v: at the boundary, or its lock time uncertain)", now.Sub(s.LockedAt).Round(time.Millisecond), cfg.lease(s))
	case e.Outcome == stores.Claimed && e.Takeover:
		return fmt.Sprintf("claimed (takeover) (the claim is %v old, past its lease of %v)", now.Sub(s.LockedAt).Round(time.Millisecond), cfg.lease(s))
	case e.Outcome == stores.InFlight:
		return fmt.Sprintf("in-flight (the claim is %v old, inside its lease of %v)", now.Sub(s.LockedAt).Round(time.Millisecond), cfg.lease(s))
	}
	return e.Outcome.String()
}
