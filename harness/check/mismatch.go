package check

import (
	"fmt"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// checkMismatch proves [Mismatch]: a reuse of a key with other
// parameters is answered 422 (and never taken over), and no request is
// answered 422 for parameters that are the key's own.
func checkMismatch(e Evidence, g grouped) countTally {
	var vs []Violation
	flagged := map[int]bool{} // Begins already reported, by input id
	keyed, order := g.keyed, g.order
	checked := 0
	for _, k := range order {
		kops := keyed[k]
		created, ok := firstClaim(kops)
		if !ok {
			continue
		}
		fp := created.Input.Fingerprint
		born, _ := firstPossibleClaim(kops)
		reset := g.firstReset(kops)
		for _, op := range kops {
			if op.Input.Kind != models.Begin || op.Input.Fingerprint == fp || !op.Output.Decided() || op.Call < created.Return {
				continue
			}
			// A release or prune that began before this Begin returned may
			// be ordered before it (they overlap, or it came first): the
			// key may have started a new life, with a new fingerprint.
			if reset < op.Return {
				continue
			}
			// So may a key whose retention may have run out by the time the
			// store decided this Begin: a store that expires keys itself
			// (Redis) needs no prune. Only a Begin certainly inside the
			// retention is judged (mayBeExpired): a Redis key-space soak
			// had a Begin wait 9 s on a loaded machine and be decided 11 s
			// after the claim, past a 10 s retention.
			if mayBeExpired(e.Model, born, op, g.prunes) {
				continue
			}
			checked++
			if o := op.Output.Decision.Outcome; o != stores.Mismatch {
				flagged[op.Input.ID] = true
				vs = append(vs, Violation{Mismatch, k.String(), fmt.Sprintf(
					"client %d reused %s with other parameters (fingerprint %s, first %s) and got %s instead of 422",
					op.Client, k, op.Input.Fingerprint, fp, o)})
			}
		}
		// A takeover says a claim was there. If every claim that may have
		// made it (claimed, or no answer) before the takeover returned had
		// other parameters, the store took over a claim of other
		// parameters: the takeover compared no fingerprint. This holds
		// even while the first claim's call is still open, where the
		// reuse above cannot be judged.
		for _, op := range kops {
			if !op.IsClaim() || !op.Output.Decision.Takeover || flagged[op.Input.ID] {
				continue
			}
			same, other := false, ""
			for _, c := range kops {
				if c.Input.ID == op.Input.ID || c.Input.Kind != models.Begin || c.Call >= op.Return || !(c.IsClaim() || c.Output.Unknown) {
					continue
				}
				if c.Input.Fingerprint == op.Input.Fingerprint {
					same = true
					break
				}
				other = c.Input.Fingerprint
			}
			if !same && other != "" {
				checked++
				vs = append(vs, Violation{Mismatch, k.String(), fmt.Sprintf(
					"client %d took %s over with fingerprint %s, but every claim it could have taken over had other parameters (%s): the takeover compared no fingerprint",
					op.Client, k, op.Input.Fingerprint, other)})
			}
		}
	}
	// A 422 is right only if the key may hold other parameters: some Begin
	// with another fingerprint claimed it (or may have: no answer) before
	// the 422 came back. Otherwise the store refused a request whose
	// parameters are the key's own: a spurious 422, as a store that merges
	// two keys (case, tenant, encoding) gives.
	spurious := 0
	for _, k := range order {
		kops := keyed[k]
		for _, op := range kops {
			if op.Input.Kind != models.Begin || !op.Output.Decided() || op.Output.Decision.Outcome != stores.Mismatch {
				continue
			}
			other := false
			for _, c := range kops {
				if c.Input.Kind == models.Begin && c.Input.Fingerprint != op.Input.Fingerprint && c.Call < op.Return &&
					(c.IsClaim() || c.Output.Unknown) {
					other = true
					break
				}
			}
			if !other {
				spurious++
				vs = append(vs, Violation{Mismatch, k.String(), fmt.Sprintf(
					"client %d was answered 422 for %s (fingerprint %s), though no request with other parameters had claimed the key: a spurious mismatch (is the key merged with another?)",
					op.Client, k, op.Input.Fingerprint)})
			}
		}
	}
	return countTally{n: checked, vs: vs}
}
