package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// explain says why a key's history is not linearizable: porcupine's
// longest partial linearization is the longest order of calls the model
// accepts; the first call (by call time) left out of it is one that no
// order allows there, and the model's possible states after the partial
// order say what the store was expected to be.
func explain(cfg models.Config, part []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var longest []porcupine.Operation
	for _, partition := range info.PartialLinearizationsOperations() {
		for _, lin := range partition {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	in := map[int]bool{}
	for _, op := range longest {
		in[op.Input.(models.Input).ID] = true
	}
	var culprit *porcupine.Operation
	for i := range part {
		if !in[part[i].Input.(models.Input).ID] && (culprit == nil || part[i].Call < culprit.Call) {
			culprit = &part[i]
		}
	}
	if culprit == nil {
		return "porcupine found no partial order to explain it"
	}
	states := []models.State{{}}
	for _, op := range longest {
		var next []models.State
		for _, st := range states {
			for _, n := range models.Step(cfg, st, op.Input.(models.Input), op.Output.(models.Output)) {
				if !slices.Contains(next, n) {
					next = append(next, n)
				}
			}
		}
		states = next
	}
	var could []string
	hint := ""
	for _, st := range states {
		if d := models.DescribeState(st); !slices.Contains(could, d) {
			could = append(could, d)
		}
		if h := models.Hint(cfg, st, culprit.Input.(models.Input), culprit.Output.(models.Output)); h != "" {
			hint = " (" + h + ")"
		}
	}
	return fmt.Sprintf("no order allows client %d's %s (called at %s%s); the longest order the model accepts has %d of the calls, after which the key could be: %s%s",
		culprit.ClientId, models.DescribeOperation(culprit.Input.(models.Input), culprit.Output.(models.Output)), ms(culprit.Call),
		clockReading(cfg, culprit.Input.(models.Input), states), len(longest), strings.Join(could, " | "), hint)
}

// clockReading says, of a Begin on a caller-clock store, what its
// request's clock read and how old each in-flight claim it may have met
// was by it, against LockTTL: a stale-boundary bug (a claim taken as
// live at exactly LockTTL) was told in real time alone ("7 ms after the
// claim"), where the store decides by the request's clock. "" otherwise.
func clockReading(cfg models.Config, in models.Input, states []models.State) string {
	if in.Kind != models.Begin || in.Now.IsZero() || cfg.Clock == stores.ServerClock {
		return ""
	}
	var ages []string
	for _, st := range states {
		if st.Exists && !st.Done && !st.Tombstone && !st.LockedAt.IsZero() {
			// A clock behind the owner's reads before locked_at: said
			// so ("-152µs after" read badly).
			a := fmt.Sprintf("%v after", in.Now.Sub(st.LockedAt))
			if d := in.Now.Sub(st.LockedAt); d < 0 {
				a = fmt.Sprintf("%v before", -d)
			}
			if !slices.Contains(ages, a) {
				ages = append(ages, a)
			}
		}
	}
	out := ", its clock reading " + in.Now.Format("15:04:05.000")
	if len(ages) > 0 {
		out += fmt.Sprintf(": %s the in-flight claim's locked_at, LockTTL %v", strings.Join(ages, " or "), cfg.LockTTL)
	}
	return out
}

// andList joins words as prose: "a", "a and b", "a, b and c".
func andList(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// keyLabels labels porcupine's picture with the keys: one annotation row
// per key ("key t0/order-o003"), spanning the key's first call to its last
// answer, since the picture itself only numbers its partitions.
func keyLabels(pops []porcupine.Operation) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, part := range models.PartitionByKey(pops) {
		k := part[0].Input.(models.Input).Key
		start, end := part[0].Call, part[0].Call
		for _, op := range part {
			start = min(start, op.Call)
			if op.Return != history.Never {
				end = max(end, op.Return)
			}
			end = max(end, op.Call)
		}
		out = append(out, porcupine.Annotation{Tag: "key " + k.String(), Start: start, End: end,
			Description: k.String(), Details: fmt.Sprintf("%d operations on key %s", len(part), k)})
	}
	return out
}
