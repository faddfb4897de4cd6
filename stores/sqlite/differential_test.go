package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// TestMatchesMemory runs the same seeded sequence of calls, one at a time, on
// this store and on the memory reference store, for every variant, and
// requires the same answer to every call. (Concurrent behaviour is the
// business of the other tests and of the shared conformance suite.)
func TestMatchesMemory(t *testing.T) {
	for _, v := range append([]string{stores.Correct}, Mutants...) {
		t.Run(v, func(t *testing.T) {
			mv := v
			if row, _ := stores.LookupMutant(v); v != stores.Correct && !row.RunsOn("memory") {
				// A bug only processes show (process-lock): one sequence
				// of calls in one process gets the correct store's answers.
				mv = stores.Correct
			}
			for seed := range uint64(2) {
				sq := open(t, v)
				mem, err := memory.New(testConfig(mv))
				if err != nil {
					t.Fatal(err)
				}
				differential(t, seed, sq, mem)
			}
		})
	}
}

func differential(t *testing.T, seed uint64, a, b stores.Store) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 42))
	keys := []stores.KeyRef{{Tenant: "t1", Key: "k"}, {Tenant: "t2", Key: "k"}, {Tenant: "t1", Key: "\x00\xff"}}
	fps := []string{"fp-a", "fp-b"}
	steps := []time.Duration{0, time.Millisecond, lockTTL / 2, lockTTL - 1, lockTTL, retention / 3, -lockTTL}
	now := t0
	// tokens[i] is the i-th token each store handed out (stores make their
	// own random tokens, so calls name tokens by index).
	var tokA, tokB []stores.Token
	ctx := context.Background()
	for i := range 250 {
		now = now.Add(steps[rng.IntN(len(steps))])
		k := keys[rng.IntN(len(keys))]
		var op, ra, rb string
		switch r := rng.IntN(10); {
		case r < 5:
			rq := req(k, fps[rng.IntN(len(fps))], now)
			op = fmt.Sprintf("Begin(%s, %s, t0+%v)", k, rq.Fingerprint, now.Sub(t0))
			da, ea := a.Begin(ctx, rq)
			db, eb := b.Begin(ctx, rq)
			ra, rb = decision(da, ea), decision(db, eb)
			if da.Token != "" {
				tokA = append(tokA, da.Token)
			}
			if db.Token != "" {
				tokB = append(tokB, db.Token)
			}
			if !da.DecidedAt.Equal(now) && ea == nil {
				t.Fatalf("%s decided at %v", op, da.DecidedAt)
			}
		case r < 8 && len(tokA) > 0 && len(tokA) == len(tokB):
			j := len(tokA) - 1 - rng.IntN(min(len(tokA), 3)) // mostly recent tokens
			resp := stores.Response{Status: 200 + i, Body: fmt.Sprintf("body %d \x00\xfe", i)}
			if r < 7 {
				op = fmt.Sprintf("Complete(%s, token #%d)", k, j)
				ra, rb = result(a.Complete(ctx, k, tokA[j], resp)), result(b.Complete(ctx, k, tokB[j], resp))
			} else {
				op = fmt.Sprintf("Release(%s, token #%d)", k, j)
				ra, rb = result(a.Release(ctx, k, tokA[j])), result(b.Release(ctx, k, tokB[j]))
			}
		default:
			op = fmt.Sprintf("Prune(t0+%v)", now.Sub(t0))
			na, ea := a.Prune(ctx, now)
			nb, eb := b.Prune(ctx, now)
			ra, rb = fmt.Sprint(na, result(ea)), fmt.Sprint(nb, result(eb))
		}
		if ra != rb {
			t.Fatalf("seed %d step %d: %s: sqlite %s, memory %s", seed, i, op, ra, rb)
		}
	}
}

func decision(d stores.Decision, err error) string {
	if err != nil {
		return "error " + err.Error()
	}
	return fmt.Sprintf("%v takeover=%v token=%v response=%+v", d.Outcome, d.Takeover, d.Token != "", d.Response)
}

func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, stores.ErrFenced):
		return "fenced"
	}
	return "error " + err.Error()
}
