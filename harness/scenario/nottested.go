package scenario

import (
	"fmt"
	"slices"
)

// NotTested records what the workload meant to test and could not,
// although it finished (a fault that hit no call): the result's notes
// say it beside a verdict that then judged less than planned.
//
// A note made again in a later round (a --duration run's) by the same
// format replaces the earlier rounds' ones: each round's note counts
// over the whole history so far, and the rounds printed one note each
// (33 of race's), their counts over every round and their totals a
// round's ("4 of 2 skewed clients"); the one left says it.
func (e *Env) NotTested(format string, args ...any) {
	e = e.root()
	e.mu.Lock()
	defer e.mu.Unlock()
	note := fmt.Sprintf(format, args...)
	for i := 0; i < len(e.untested); {
		if b := e.untestedBy[i]; b.format == format && b.round < e.Round {
			e.untested = slices.Delete(e.untested, i, i+1)
			e.untestedBy = slices.Delete(e.untestedBy, i, i+1)
			continue
		}
		i++
	}
	if e.Round > 0 {
		note += fmt.Sprintf(" [in %d rounds: the counts are the run's, a total of keys, clients or orders one round's]", e.Round+1)
	}
	e.untested = append(e.untested, note)
	e.untestedBy = append(e.untestedBy, untestedAt{format, e.Round})
}

// untestedAt is what made a note: its format, and the round.
type untestedAt struct {
	format string
	round  int
}
