package scenario

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// lateSecondBegin is a correct store whose second Begin of each key is
// held (a session the pool is still making, on a loaded machine) until
// the key's claim ends, its answer saved or the claim released: the
// client that comes second (the skew scenario's skewed client, the
// mismatch scenario's first request with other parameters) then meets
// the saved answer, not the owner's live claim. With every set, each
// Begin after the key's first is held; for hold at most (0: 10 s),
// whatever happens. (Held until a save alone, a key the scenario's
// warm-up claims and releases twice held its second warm-up Begin the
// whole 10 s.)
type lateSecondBegin struct {
	stores.Store
	every bool
	hold  time.Duration
	mu    sync.Mutex
	begun map[stores.KeyRef]int
	ended map[stores.KeyRef]chan struct{} // closed once the key's claim ends
}

// newLateSecondBegin wraps st (every and hold as lateSecondBegin says).
func newLateSecondBegin(st stores.Store, every bool, hold time.Duration) *lateSecondBegin {
	return &lateSecondBegin{Store: st, every: every, hold: hold, begun: map[stores.KeyRef]int{}, ended: map[stores.KeyRef]chan struct{}{}}
}

func (s *lateSecondBegin) endedCh(k stores.KeyRef) chan struct{} {
	ch, ok := s.ended[k]
	if !ok {
		ch = make(chan struct{})
		s.ended[k] = ch
	}
	return ch
}

func (s *lateSecondBegin) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	s.mu.Lock()
	s.begun[req.KeyRef]++
	n := s.begun[req.KeyRef]
	second, ended := n == 2 || s.every && n > 2, s.endedCh(req.KeyRef)
	s.mu.Unlock()
	if second {
		hold := s.hold
		if hold == 0 {
			hold = 10 * time.Second
		}
		select {
		case <-ended:
		case <-time.After(hold):
		}
		req.Now = time.Now()
	}
	return s.Store.Begin(ctx, req)
}

func (s *lateSecondBegin) Complete(ctx context.Context, k stores.KeyRef, t stores.Token, r stores.Response) error {
	return s.claimEnded(k, s.Store.Complete(ctx, k, t, r))
}

func (s *lateSecondBegin) Release(ctx context.Context, k stores.KeyRef, t stores.Token) error {
	return s.claimEnded(k, s.Store.Release(ctx, k, t))
}

// claimEnded lets the key's held Begins go once its claim ended (err nil).
func (s *lateSecondBegin) claimEnded(k stores.KeyRef, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.endedCh(k); err == nil && !isClosed(ch) {
		close(ch)
	}
	return err
}

// TestSaysWhenTheSecondClientCameLate: on a store that answers a key's
// second Begin only after the key's answer is saved, the skew scenario's
// skewed clients and the mismatch scenario's requests with other
// parameters met no live claim, and each scenario says so for every
// order, rather than pass as if that had been tested; on the same store
// answering at once they say nothing.
func TestSaysWhenTheSecondClientCameLate(t *testing.T) {
	// On the store that answers at once, the others must still be
	// answered within the owner's wait for them (half a LockTTL, 5 s at
	// most), or the scenario rightly writes the note: 50 ms at 100 ms, which
	// a deschedule on CI's loaded machine can outlast. The waits end when
	// the others are answered, so a longer LockTTL costs mismatch nothing;
	// skew's skewed client holds still for LockTTL/8 + LockTTL/2 after its
	// takeover, so there 2 s, a wait of 1 s (and a run of about 1.3 s).
	// The late runs keep 100 ms: the held Begin is answered only after the
	// save, whatever the load.
	for _, sc := range []struct {
		name, what string
		clients    int
		onTimeTTL  time.Duration
	}{{"skew", "skew: ", 2, 2 * time.Second}, {"mismatch", "mismatch: ", 3, 10 * time.Second}} {
		for _, late := range []bool{true, false} {
			cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Minute}
			if !late {
				cfg.LockTTL = sc.onTimeTTL
			}
			mem, err := memory.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var st stores.Store = mem
			if late {
				st = newLateSecondBegin(mem, false, 0)
			}
			wantNote(t, notesOf(t, sc.name, st, cfg, sc.clients, 4), sc.what, 4, late)
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
