package check

import (
	"math/rand"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestWitnessIsSound: on 3,000 trials of the decision table on one key
// (randomKeyHistory: calls stretched to overlap, half with one answer
// changed), a witness is found only for histories porcupine calls
// linearizable, and for most of those.
func TestWitnessIsSound(t *testing.T) {
	m, model := trialModel()
	r := rand.New(rand.NewSource(2))
	found := map[bool]int{}
	verdicts := map[bool]int{}
	for trial := range 3000 {
		part, ops := randomKeyHistory(t, trial, r, m)
		want := porcupine.CheckOperations(model, part)
		verdicts[want]++
		if witnessed(m, part) {
			if !want {
				t.Fatalf("trial %d: a witness for a history that is not linearizable\n%v", trial, ops)
			}
			found[want]++
		}
	}
	if verdicts[false] < 500 || found[true] < verdicts[true]/2 {
		t.Fatalf("verdicts %v, witnesses %v: the trials did not exercise the witness", verdicts, found)
	}
	t.Logf("verdicts %v; witnesses found for %d linearizable histories", verdicts, found[true])
}
