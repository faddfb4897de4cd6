package check

import (
	"math/rand"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
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
		if witnessed(m, part, nil) {
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

// longKey is one key's history of n calls, linearizable: a claim, its
// save, then n-2 replays, each overlapping the next (so that every step
// has two calls that may come next), as a key retried all run long is.
func longKey(n int) []porcupine.Operation {
	now := time.Unix(1000, 0)
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	resp := stores.Response{Status: 201, Body: "x"}
	ops := []porcupine.Operation{
		{ClientId: 0, Call: 0, Return: 10, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp", Now: now},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "t1"}}},
		{ClientId: 0, Call: 20, Return: 30, Input: models.Input{Kind: models.Complete, Key: key, Token: "t1", Response: resp, Now: now}, Output: models.Output{}},
	}
	for i := range n - 2 {
		at := int64(40 + 10*i)
		ops = append(ops, porcupine.Operation{ClientId: 1 + i%2, Call: at, Return: at + 15,
			Input:  models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp", Now: now},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Replay, Response: resp}}})
	}
	return ops
}

// TestWitnessStopsWhenDone: a witness search gives up once its done
// channel closes (an interrupt), where it found one before; a search of
// a long key had kept a run deaf to its interrupt for minutes.
func TestWitnessStopsWhenDone(t *testing.T) {
	m, _ := trialModel()
	part := longKey(10000)
	if !witnessed(m, part, nil) {
		t.Fatal("no witness for a claim, its save and its replays")
	}
	done := make(chan struct{})
	close(done)
	if witnessed(m, part, done) {
		t.Fatal("a witness search went on after its done closed")
	}
}

// BenchmarkWitnessLongKey times the witness of one key of 20,000 calls
// (witnessOps): each step reads the earliest return of the calls left
// from a sorted order, where it scanned them all.
func BenchmarkWitnessLongKey(b *testing.B) {
	m, _ := trialModel()
	part := longKey(witnessOps)
	for b.Loop() {
		if !witnessed(m, part, nil) {
			b.Fatal("no witness")
		}
	}
}
