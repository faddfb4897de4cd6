package redis

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/storetest"
)

// Each mutant gets a short deterministic scenario that makes its bug happen.
// The same scenario runs against the correct store, where the bug must not
// happen: that shows the scenario tests the bug, not the setup.
var mutantScenarios = map[string]struct {
	lockTTL, retention time.Duration
	// run plays the scenario and reports whether the bug showed.
	run func(t *testing.T, s *Store) bool
}{
	// Two requests both read "no key" before either writes: both claim.
	"select-then-insert": {long, long, func(t *testing.T, s *Store) bool {
		ds := concurrentBegins(t, s, req("k", "f"))
		return ds[0].Outcome == stores.Claimed && ds[1].Outcome == stores.Claimed
	}},
	// The same race with no failpoint of ours between EXISTS and the
	// claim: the two requests go round trip for round trip in lockstep
	// (at the driver's hook), so both ask EXISTS before either claims.
	"split-claim": {long, long, func(t *testing.T, s *Store) bool {
		warm(t, s)
		ds := lockstep(t, s, req("k", "f"))
		return ds[0].Outcome == stores.Claimed && ds[1].Outcome == stores.Claimed
	}},
	// A stale owner's save lands over the new owner's claim.
	"unfenced-complete": {short, long, func(t *testing.T, s *Store) bool {
		a := begin(t, s, req("k", "f"))
		time.Sleep(past)
		b := begin(t, s, req("k", "f"))
		want(t, b, stores.Claimed)
		err := s.Complete(context.Background(), ref("k"), a.Token, stores.Response{Status: 200, Body: "stale"})
		if err == nil {
			if got := begin(t, s, req("k", "f")); got.Response.Body != "stale" {
				t.Errorf("stale save did not land: %+v", got)
			}
		}
		return err == nil
	}},
	// A stale owner deletes the new owner's claim: a third request claims.
	"unfenced-release": {short, long, func(t *testing.T, s *Store) bool {
		a := begin(t, s, req("k", "f"))
		time.Sleep(past)
		want(t, begin(t, s, req("k", "f")), stores.Claimed)
		err := s.Release(context.Background(), ref("k"), a.Token)
		if err == nil {
			want(t, begin(t, s, req("k", "f")), stores.Claimed) // B still runs: two owners
		}
		return err == nil
	}},
	// Another request's parameters replay the first answer.
	"no-fingerprint": {long, long, func(t *testing.T, s *Store) bool {
		d := begin(t, s, req("k", "amount=10"))
		if err := s.Complete(context.Background(), ref("k"), d.Token, stores.Response{Status: 200, Body: "charged 10"}); err != nil {
			t.Fatal(err)
		}
		return begin(t, s, req("k", "amount=99")).Outcome == stores.Replay
	}},
	// Two takers both judge the claim stale, then both write: two owners,
	// each claim made while the other's was live (storetest.TwoOwners: on
	// the correct store, which never stops at the failpoint, a loaded
	// machine can run the two Begins a LockTTL apart, and the second then
	// rightly takes the first's stale claim over).
	"blind-takeover": {short, long, func(t *testing.T, s *Store) bool {
		begin(t, s, req("k", "f"))
		time.Sleep(past)
		ds := concurrentBegins(t, s, req("k", "f"))
		bug, seen := storetest.TwoOwners(ds[0], ds[1], short)
		t.Log(seen)
		return bug
	}},
	// A's claim goes stale; T reads it and stops before its write; A
	// releases, O (other parameters) claims, and O's claim goes stale; T's
	// write takes O's claim over: both hold claims, of two fingerprints.
	// (The correct Begin is one script: T takes A's claim over, A's
	// release is fenced, and O is told 422.)
	"takeover-by-state": {short, long, func(t *testing.T, s *Store) bool {
		a := begin(t, s, req("k", "f1"))
		time.Sleep(past)
		taker := storetest.ParkBegin(context.Background(), s, faults.BeginAfterSelect, req("k", "f1"))
		_ = s.Release(context.Background(), ref("k"), a.Token) // fenced on the correct store
		dO := begin(t, s, req("k", "f2"))
		time.Sleep(past)
		dT, errT := taker.Resume()
		if errT != nil {
			t.Fatal(errT)
		}
		return dT.Outcome == stores.Claimed && dO.Outcome == stores.Claimed
	}},
	// A claims (token 1); B takes over (2) and releases; C claims (1 again);
	// A's stale save passes the fence and lands over C's claim.
	"token-reuse": {short, long, func(t *testing.T, s *Store) bool {
		ctx := context.Background()
		a := begin(t, s, req("k", "f"))
		time.Sleep(past)
		b := begin(t, s, req("k", "f"))
		if err := s.Release(ctx, ref("k"), b.Token); err != nil {
			t.Fatal(err)
		}
		c := begin(t, s, req("k", "f"))
		want(t, c, stores.Claimed)
		err := s.Complete(ctx, ref("k"), a.Token, stores.Response{Status: 200, Body: "A"})
		if err == nil && c.Token != a.Token {
			t.Errorf("stale save passed with a different token: %s vs %s", a.Token, c.Token)
		}
		return err == nil
	}},
	// A crashed owner's key stays in flight forever.
	"no-takeover": {short, long, func(t *testing.T, s *Store) bool {
		begin(t, s, req("k", "f"))
		time.Sleep(past)
		return begin(t, s, req("k", "f")).Outcome == stores.InFlight
	}},
	// A done key is gone after LockTTL, well inside retention: a retry runs again.
	"short-retention": {short, long, func(t *testing.T, s *Store) bool {
		d := begin(t, s, req("k", "f"))
		if err := s.Complete(context.Background(), ref("k"), d.Token, stores.Response{Status: 200}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(past)
		return begin(t, s, req("k", "f")).Outcome == stores.Claimed
	}},
	// B judges A's claim stale; A saves its answer; B writes the record it
	// read back whole: A's answer is erased and B runs the work again.
	"stale-overwrite": {short, long, func(t *testing.T, s *Store) bool {
		ctx := context.Background()
		a := begin(t, s, req("k", "f"))
		time.Sleep(past)
		var saveErr error = errors.New("A never saved")
		hctx := faults.WithHandler(ctx, faults.HandlerFunc(func(_ context.Context, name string) error {
			if name == faults.BeginAfterSelect {
				saveErr = s.Complete(ctx, ref("k"), a.Token, stores.Response{Status: 200, Body: "A"})
			}
			return nil
		}))
		b, err := s.Begin(hctx, req("k", "f"))
		if err != nil {
			t.Fatal(err)
		}
		erased := saveErr == nil && b.Outcome == stores.Claimed
		if erased {
			want(t, begin(t, s, req("k", "f")), stores.InFlight) // not Replay: the answer is gone
		}
		return erased
	}},
}

// concurrentBegins runs two Begins on r at once. If the store passes through
// faults.BeginAfterSelect, each waits there until both have arrived, so both
// read before either writes; an atomic store never stops there.
func concurrentBegins(t *testing.T, s *Store, r stores.Request) [2]stores.Decision {
	return concurrentAt(t, s, r, faults.BeginAfterSelect, 1)
}

// concurrentAt runs two Begins on r at once, each waiting at its nth pass
// through the failpoint until both have arrived there.
func concurrentAt(t *testing.T, s *Store, r stores.Request, failpoint string, nth int) [2]stores.Decision {
	var mu sync.Mutex
	arrived := 0
	both := make(chan struct{})
	handler := func() faults.Handler { // one per request: it counts that request's passes
		passes := 0
		return faults.HandlerFunc(func(ctx context.Context, name string) error {
			if name != failpoint {
				return nil
			}
			if passes++; passes != nth {
				return nil
			}
			mu.Lock()
			arrived++
			if arrived == 2 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
			case <-time.After(5 * time.Second):
				t.Error("the other request never reached the failpoint")
			}
			return nil
		})
	}
	var out [2]stores.Decision
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		h := handler()
		go func() {
			defer wg.Done()
			d, err := s.Begin(faults.WithHandler(context.Background(), h), r)
			if err != nil {
				t.Error(err)
			}
			out[i] = d
		}()
	}
	wg.Wait()
	return out
}

// storeSide lists the store's store-side mutants: its configuration one
// (NoPersistence) has its own tests.
func storeSide() []string {
	var out []string
	for _, m := range Mutants {
		if row, _ := stores.LookupMutant(m); row.Side == stores.StoreSide {
			out = append(out, m)
		}
	}
	return out
}

// mutantTries is how many times testMutants runs a mutant's schedule
// before it says the mutant did not show its bug.
const mutantTries = 3

func testMutants(t *testing.T, addr string) {
	t.Parallel()
	for _, m := range storeSide() {
		sc, ok := mutantScenarios[m]
		if bug := storetest.Bugs[m]; !ok && bug != nil {
			sc.lockTTL, sc.retention, ok = short, long, true // some wait LockTTL out
			if m == "never-expire" {
				sc.retention = short // it waits the retention out
			}
			sc.run = func(t *testing.T, s *Store) bool {
				happened, seen := bug(t, s, storetest.Clock{Now: time.Now, Advance: time.Sleep}, stores.Config{LockTTL: sc.lockTTL, Retention: sc.retention})
				t.Log(seen)
				return happened
			}
		}
		if !ok {
			t.Errorf("mutant %s has no scenario", m)
			continue
		}
		for _, variant := range []string{m, stores.Correct} {
			t.Run(m+"/"+variant, func(t *testing.T) {
				t.Parallel()
				bug := sc.run(t, open(t, addr, variant, sc.lockTTL, sc.retention))
				// A mutant's schedule may be run again, on a fresh store,
				// up to mutantTries times in all: on a loaded machine (CI)
				// blind-takeover's two writes can land a LockTTL apart, and
				// then the second is a fair takeover and shows nothing. The
				// correct store runs it once: a bug there is a bug.
				for try := 1; variant != stores.Correct && !bug && try < mutantTries; try++ {
					t.Logf("%s did not show its bug; again on a fresh store", variant)
					bug = sc.run(t, open(t, addr, variant, sc.lockTTL, sc.retention))
				}
				switch {
				case variant == m && !bug:
					t.Errorf("mutant %s: the bug did not happen", m)
				case variant == stores.Correct && bug:
					t.Errorf("correct store shows the %s bug", m)
				}
			})
		}
	}
}

// lockstep runs two Begins on r at once, round trip for round trip: each
// waits at its nth faults.BeforeRoundTrip until the other has made n round
// trips or has finished.
func lockstep(t *testing.T, s *Store, r stores.Request) [2]stores.Decision {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	var trips [2]int
	var finished [2]bool
	var out [2]stores.Decision
	var wg sync.WaitGroup
	for i := range out {
		other := 1 - i
		h := faults.HandlerFunc(func(_ context.Context, name string) error {
			if name != faults.BeforeRoundTrip {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			trips[i]++
			cond.Broadcast()
			for trips[other] < trips[i] && !finished[other] {
				cond.Wait()
			}
			return nil
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := s.Begin(faults.WithHandler(context.Background(), h), r)
			if err != nil {
				t.Error(err)
			}
			out[i] = d
			mu.Lock()
			finished[i] = true
			cond.Broadcast()
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// warm makes the store's first round trips of a Begin the ones the scenario
// counts: two connections open (so neither request dials during the race)
// and the scripts loaded (so no EVALSHA answers NOSCRIPT and is sent again).
func warm(t *testing.T, s *Store) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each holds its connection 50 ms: two connections are opened.
			if err := s.rdb.BLPop(context.Background(), 50*time.Millisecond, "warm-list").Err(); err != nil && !errors.Is(err, goredis.Nil) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	begin(t, s, req("warm", "f")) // no key: the claim script
	begin(t, s, req("warm", "f")) // the key: the begin script
}
