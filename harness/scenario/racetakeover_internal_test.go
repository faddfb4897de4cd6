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
		!strings.Contains(n, "a longer LockTTL (--lock-ttl; in idemtest, Factory.LockTTL)") {
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
// TestRaceSaysNoBeginMetALiveClaim: a key whose other clients all came
// once its first had saved (replays, never in-flight: a store of one
// process per call serves them one after the other, and one that takes
// live claims over passed race so) is said not raced for a live claim;
// one in-flight answer and nothing is said.
func TestRaceSaysNoBeginMetALiveClaim(t *testing.T) {
	const note = "race: no Begin of 3 met a live claim"
	for _, met := range []bool{false, true} {
		env := raceEnv(t)
		key := stores.KeyRef{Tenant: "t", Key: "k"}
		begin := func(at int64, d stores.Decision) {
			env.Hist.AddOp(history.Op{Client: int(at), Input: models.Input{Kind: models.Begin, Key: key, Fingerprint: "fp"},
				Output: models.Output{Decision: d}, Call: at, Return: at + 1})
		}
		begin(1, stores.Decision{Outcome: stores.Claimed, Token: "a"})
		env.Hist.AddOp(history.Op{Client: 1, Input: models.Input{Kind: models.Complete, Key: key, Token: "a"}, Call: 3, Return: 4})
		begin(5, stores.Decision{Outcome: stores.Replay})
		if met {
			begin(2, stores.Decision{Outcome: stores.InFlight})
		} else {
			begin(6, stores.Decision{Outcome: stores.Replay})
		}
		sayRaceTakeovers(env)
		if n := strings.Join(env.untested, "\n"); strings.Contains(n, note) == met {
			t.Errorf("a Begin met a live claim: %v; notes %q", met, n)
		}
	}
}

func raceEnv(t *testing.T) *Env {
	t.Helper()
	cfg := stores.Config{LockTTL: time.Second, Retention: time.Minute}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return NewEnv(Setup{Name: "race", Store: mem, Config: cfg, Clients: 2, Keys: 1, Seed: 1, RandSeed: 1})
}
