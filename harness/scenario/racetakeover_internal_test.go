package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// TestRaceSaysItsTakeovers: a race whose owners lost their claims (the
// store answered them slower than their lease) says how many claims took
// a stale one over and how many stale saves were fenced, and what keeps
// owners live; a race without a takeover says nothing.
func TestRaceSaysItsTakeovers(t *testing.T) {
	env := raceEnv(t)
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	claim := func(tok string, takeover bool, at int64) {
		env.Hist.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp"},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: stores.Token(tok), Takeover: takeover}}, Call: at, Return: at + 1})
	}
	claim("a", false, 1)
	sayRaceTakeovers(env)
	if len(env.untested) != 0 {
		t.Fatalf("no takeover, yet: %q", env.untested)
	}
	claim("b", true, 10)
	env.Hist.AddOp(history.Op{Client: 2, Input: models.Input{Kind: models.Complete, Key: key, Token: "a"}, Output: models.Output{Fenced: true}, Call: 20, Return: 21})
	sayRaceTakeovers(env)
	if n := strings.Join(env.untested, "\n"); !strings.Contains(n, "race: 1 claims of 1 keys took over a claim gone stale (1 saves of stale owners fenced)") ||
		!strings.Contains(n, "a longer --lock-ttl") {
		t.Fatalf("notes: %q", n)
	}
}

// TestRaceSaysAClaimLeftBehind: an owner whose save the store refused
// (not applied) goes back to Begin, meets its own claim and waits out
// the lease; the takeover that follows is said as such, not as a store
// slower than its owners' lease (calls of 0.7 s under a 30 s lease were).
func TestRaceSaysAClaimLeftBehind(t *testing.T) {
	env := raceEnv(t)
	key := stores.KeyRef{Tenant: "t", Key: "k"}
	env.Hist.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp"},
		Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "a"}}, Call: 1, Return: 2})
	env.Hist.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Complete, Key: key, Token: "a"}, Output: models.Output{NotApplied: true}, Call: 3, Return: 4})
	env.Hist.AddOp(history.Op{Client: 2, Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp"},
		Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: "b", Takeover: true}}, Call: 10, Return: 11})
	sayRaceTakeovers(env)
	n := strings.Join(env.untested, "\n")
	if !strings.Contains(n, "race: 1 claims of 1 keys took over a claim whose owner's save or release had failed") || strings.Contains(n, "slower than their lease") {
		t.Fatalf("notes: %q", n)
	}
}

// raceEnv is a race scenario's environment of one key on a memory store,
// for notes made from a history written by hand.
func raceEnv(t *testing.T) *Env {
	t.Helper()
	cfg := stores.Config{LockTTL: time.Second, Retention: time.Minute}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return NewEnv(Setup{Name: "race", Store: mem, Config: cfg, Clients: 2, Keys: 1, Seed: 1, RandSeed: 1})
}
