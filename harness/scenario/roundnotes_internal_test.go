package scenario

import (
	"strings"
	"testing"
)

// TestNotesOfLaterRoundsReplaceEarlier: a --duration run's rounds each
// made race's note anew over the history so far (33 notes, "3 claims"
// to "76 claims"); a later round's note of the same format replaces the
// earlier rounds' and says its counts are the run's. Two notes of one
// format in one round both stay.
func TestNotesOfLaterRoundsReplaceEarlier(t *testing.T) {
	env := raceEnv(t)
	env.SetRound(0)
	env.NotTested("race: %d claims of %d keys", 3, 2)
	env.NotTested("fault %s hit no call", "pause")
	env.NotTested("fault %s hit no call", "kill")
	env.SetRound(1)
	env.NotTested("race: %d claims of %d keys", 5, 2)
	got := env.Record().NotTested
	if len(got) != 3 || got[0] != "fault pause hit no call" || got[1] != "fault kill hit no call" ||
		!strings.HasPrefix(got[2], "race: 5 claims of 2 keys [in 2 rounds: the counts are the run's") {
		t.Fatalf("notes %q: want the round's two fault notes and the last race note, saying its rounds", got)
	}
}
