package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/sched"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// warmStore claims every key, and answers every save and release with
// err.
type warmStore struct {
	stores.Store
	err error
}

func (warmStore) Begin(context.Context, stores.Request) (stores.Decision, error) {
	return stores.Decision{Outcome: stores.Claimed, Token: "t"}, nil
}
func (w warmStore) Complete(context.Context, stores.KeyRef, stores.Token, stores.Response) error {
	return w.err
}
func (w warmStore) Release(context.Context, stores.KeyRef, stores.Token) error { return w.err }

// TestNetWarmTakesFencedAsAnAnswer: a warm-up save refused as fenced (its
// lease ran out on the way: a short LockTTL on a loaded machine, a store
// with lease-bound writes) is an answer, and the warm-up is done; any
// other error stops the scenario.
func TestNetWarmTakesFencedAsAnAnswer(t *testing.T) {
	ctx := context.Background()
	if err := netWarm(ctx, warmStore{err: errors.Join(stores.ErrFenced, errors.New("the lease ran out"))}, 0); err != nil {
		t.Errorf("a fenced warm-up save: %v", err)
	}
	if err := netWarm(ctx, warmStore{err: errors.New("connection reset")}, 0); err == nil {
		t.Error("a failed warm-up save passed")
	}
}

// lateStore answers its first late Begins with stores.ErrLateClaim, then
// claims; it keeps the keys its saves and releases were sent for.
type lateStore struct {
	warmStore
	late  int
	saved []string
}

func (l *lateStore) Begin(context.Context, stores.Request) (stores.Decision, error) {
	if l.late > 0 {
		l.late--
		return stores.Decision{}, fmt.Errorf("begin: %w (it took 231ms, LockTTL allows 187.5ms)", stores.ErrLateClaim)
	}
	return stores.Decision{Outcome: stores.Claimed, Token: "t"}, nil
}
func (l *lateStore) Complete(_ context.Context, k stores.KeyRef, _ stores.Token, _ stores.Response) error {
	l.saved = append(l.saved, k.Key)
	return nil
}
func (l *lateStore) Release(_ context.Context, k stores.KeyRef, _ stores.Token) error {
	l.saved = append(l.saved, k.Key)
	return nil
}

// TestNetWarmTriesAnotherKeyAfterALateClaim: a warm-up claim that came
// back too late to hand out (stores.ErrLateClaim) is tried again on
// another key, and the save and release go to the keys claimed in time;
// a store whose every claim is late stops the scenario after
// netWarmTries keys.
func TestNetWarmTriesAnotherKeyAfterALateClaim(t *testing.T) {
	ctx := context.Background()
	l := &lateStore{late: netWarmTries - 1}
	if err := netWarm(ctx, l, 7); err != nil {
		t.Fatalf("late claims, then one in time: %v", err)
	}
	if want := []string{fmt.Sprintf("warm-7-0-%d", netWarmTries-1), "warm-7-1-0"}; !slices.Equal(l.saved, want) {
		t.Errorf("saved and released %v, want %v", l.saved, want)
	}
	if err := netWarm(ctx, &lateStore{late: netWarmTries}, 7); !errors.Is(err, stores.ErrLateClaim) {
		t.Errorf("every claim late: %v, want the late claim's error", err)
	}
}

// lostAnswers is a correct store whose first lost calls lose their
// answers after acting, whatever the call.
type lostAnswers struct {
	stores.Store
	lost int
}

func (l *lostAnswers) lose() bool {
	if l.lost > 0 {
		l.lost--
		return true
	}
	return false
}

func (l *lostAnswers) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	d, err := l.Store.Begin(ctx, req)
	if err == nil && l.lose() {
		return stores.Decision{}, errLostAnswer
	}
	return d, err
}

func (l *lostAnswers) Complete(ctx context.Context, k stores.KeyRef, tok stores.Token, resp stores.Response) error {
	err := l.Store.Complete(ctx, k, tok, resp)
	if err == nil && l.lose() {
		return errLostAnswer
	}
	return err
}

// TestNetWarmThroughLostAnswers: a warm-up call whose answer is lost made
// its round trips: the warm-up goes on with another key (behind
// scripts/lossy-exec.py a lost answer ended lost-reply undecided), and
// only netWarmTries keys in a row without an answer stop it.
func TestNetWarmThroughLostAnswers(t *testing.T) {
	ctx := context.Background()
	mem, err := memory.New(stores.Config{LockTTL: time.Second, Retention: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := netWarm(ctx, &lostAnswers{Store: mem, lost: 2}, 3); err != nil { // a claim's and a save's answers lost
		t.Fatalf("two answers lost: %v", err)
	}
	if err := netWarm(ctx, &lostAnswers{Store: mem, lost: 2 * netWarmTries}, 4); !errors.Is(err, errLostAnswer) {
		t.Errorf("every answer lost: %v, want the lost answer's error", err)
	}
}

// TestPrunerStopIsBetweenCalls: a scheduled pruner's wait before each
// Prune is the harness's, between calls: an episode whose only other
// stops are the Run flow's was interleaved between calls only, and says
// so (a store without failpoints once lost the note in sched-race).
func TestPrunerStopIsBetweenCalls(t *testing.T) {
	log := []sched.Event{{Kind: sched.Parked, Client: "c1", Failpoint: faults.RunAfterClaim},
		{Kind: sched.Parked, Client: "c3", Failpoint: prunerStop}}
	if n := insideStops(log); n != 0 {
		t.Errorf("%d stops inside a call, want 0", n)
	}
	if BetweenCallsOnly([]EpisodeRecord{{Inside: insideStops(log)}}) == "" {
		t.Error("no note for an episode interleaved between calls only")
	}
	log = append(log, sched.Event{Kind: sched.Parked, Client: "c2", Failpoint: "begin.after-select"})
	if n := insideStops(log); n != 1 {
		t.Errorf("%d stops inside a call, want 1", n)
	}
}
