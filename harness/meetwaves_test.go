package harness_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/stores"
)

// serialStore answers one call at a time, each after d, as a store
// served by a single process does: every key's calls at once queue for
// as long as they take together.
type serialStore struct {
	stores.Store
	mu *sync.Mutex
	d  time.Duration
}

func (s serialStore) wait() func() {
	s.mu.Lock()
	time.Sleep(s.d)
	return s.mu.Unlock
}

func (s serialStore) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	defer s.wait()()
	return s.Store.Begin(ctx, req)
}

func (s serialStore) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	defer s.wait()()
	return s.Store.Complete(ctx, key, tok, resp)
}

func (s serialStore) Release(ctx context.Context, key stores.KeyRef, tok stores.Token) error {
	defer s.wait()()
	return s.Store.Release(ctx, key, tok)
}

// TestMeetingsOnAStoreThatAnswersOneCallAtATime: skew and mismatch test
// their orders only when the late clients are answered while the first
// one's claim is live. On a store that answers one call at a time, every
// key at once queued them past the owner's save, and both scenarios
// passed with a note that they had tested no order; in waves sized by the
// store's pace (meetingWave), every order meets.
func TestMeetingsOnAStoreThatAnswersOneCallAtATime(t *testing.T) {
	o := harnesstest.Options(t, "memory", stores.Correct, "skew", "mismatch")
	// The late clients must be answered within the owner's wait (half a
	// LockTTL), and a wave's calls fill about half of it: at the default
	// 250 ms a deschedule on CI's loaded machine past about 60 ms during a
	// wave rightly made the scenarios miss orders. At 2 s a wave leaves
	// about half a second. Every key at once must still queue past the
	// owner's wait, or this test would pass on a meetingWave that made no
	// waves: 320 keys keep the queue's share of LockTTL what 40 keys had
	// at 250 ms, and every key at once misses orders of both scenarios.
	// The run takes about 15 s instead of 3.
	o.LockTTL = 2 * time.Second
	o.Keys = 320
	wrapStores(&o, func(s stores.Store) stores.Store { return serialStore{s, &sync.Mutex{}, 3 * time.Millisecond} })
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != check.Pass {
		t.Fatalf("a correct store: %s (%v)", sum.Verdict, sum.Violations)
	}
	for _, s := range sum.Scenarios {
		for _, n := range s.Notes {
			if strings.Contains(n, "not tested") {
				t.Errorf("%s: %s", s.Name, n)
			}
		}
		if s.Name == "skew" && s.Findings["skew_takeovers"] != o.Keys {
			t.Errorf("skew: %d takeovers by a skewed clock, want one for each of %d keys (memory judges by the caller's clock)", s.Findings["skew_takeovers"], o.Keys)
		}
		t.Logf("%s: %d calls in %.1f s", s.Name, s.Ops, s.Seconds)
	}
}
