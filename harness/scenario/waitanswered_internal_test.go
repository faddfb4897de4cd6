package scenario

import (
	"context"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// TestWaitAnsweredReadsAnIdlePoolsLastAnswer: a worker's last answer lands
// in the history just before the pool turns idle, between the wait's read
// of the answers and its question to the pool, the moment a loaded
// machine gives it. The wait returns no order left: it asks whether the
// pool is idle before it reads the answers, so an idle pool's answers are
// all read. Asked after, the answered order was counted as left and a
// correct store's workers run ended undecided.
func TestWaitAnsweredReadsAnIdlePoolsLastAnswer(t *testing.T) {
	cfg := stores.Config{LockTTL: time.Second, Retention: time.Hour}
	mem, err := memory.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := NewEnv(Setup{Name: "workers", Store: mem, Config: cfg, Clients: 2, Keys: 1, Seed: 1, RandSeed: 1})
	o := env.Order(0, "")
	answered := false
	idle := func() bool { // the last answer comes, and then the pool is idle
		if !answered {
			answered = true
			env.Hist.AddAnswer(history.Answer{Client: 1, Key: o.Key, Order: o.ID, Fingerprint: o.Fingerprint,
				Response: stores.Response{Status: 201, Body: "ok"}, Status: 201, Attempts: 1})
		}
		return true
	}
	if left := waitAnswered(context.Background(), env, []workload.Order{o}, idle, time.Minute); len(left) != 0 {
		t.Errorf("%d orders left (first %s), though the pool was idle with every order answered", len(left), left[0].ID)
	}
}
