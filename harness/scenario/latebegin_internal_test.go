package scenario

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// lateSecondBegin is a correct store whose second Begin of each key is
// held (a session the pool is still making, on a loaded machine) until
// the key's answer is saved: the client that comes second (the skew
// scenario's skewed client, the mismatch scenario's first request with
// other parameters) then meets the saved answer, not the owner's live
// claim.
type lateSecondBegin struct {
	stores.Store
	mu    sync.Mutex
	begun map[stores.KeyRef]int
	saved map[stores.KeyRef]chan struct{}
}

func (s *lateSecondBegin) savedCh(k stores.KeyRef) chan struct{} {
	ch, ok := s.saved[k]
	if !ok {
		ch = make(chan struct{})
		s.saved[k] = ch
	}
	return ch
}

func (s *lateSecondBegin) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	s.mu.Lock()
	s.begun[req.KeyRef]++
	second, saved := s.begun[req.KeyRef] == 2, s.savedCh(req.KeyRef)
	s.mu.Unlock()
	if second {
		select {
		case <-saved:
		case <-time.After(10 * time.Second):
		}
		req.Now = time.Now()
	}
	return s.Store.Begin(ctx, req)
}

func (s *lateSecondBegin) Complete(ctx context.Context, k stores.KeyRef, t stores.Token, r stores.Response) error {
	err := s.Store.Complete(ctx, k, t, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.savedCh(k); err == nil && !isClosed(ch) {
		close(ch)
	}
	return err
}

// TestSkewSaysWhenTheSkewedClientCameLate: on a store that answers the
// skewed clients only after the owners' saves, the skew scenario met no
// live claim, and says so (Env.NotTested) for every order, rather than
// pass as if a skewed clock had been tested; on the same store answering
// at once it says nothing.
func TestSkewSaysWhenTheSkewedClientCameLate(t *testing.T) {
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Minute}
	skew, ok := Lookup("skew")
	if !ok {
		t.Fatal("no skew scenario")
	}
	for _, late := range []bool{true, false} {
		mem, err := memory.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var st stores.Store = mem
		if late {
			st = &lateSecondBegin{Store: mem, begun: map[stores.KeyRef]int{}, saved: map[stores.KeyRef]chan struct{}{}}
		}
		const keys = 4
		env := NewEnv(Setup{Name: "skew", Store: st, Config: cfg, Clients: 2, Keys: keys, Seed: 1, RandSeed: 1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		skew.Run(ctx, env)
		cancel()
		notes := strings.Join(env.Record().NotTested, "\n")
		t.Logf("late %v: notes %q", late, notes)
		switch {
		case late && !strings.Contains(notes, "skew: ") || late && !strings.Contains(notes, ": 4 of 4 orders"):
			t.Errorf("the skewed clients all came after the saves, but the notes say %q", notes)
		case !late && notes != "":
			t.Errorf("the skewed clients met live claims, but the notes say %q", notes)
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

// TestMismatchSaysWhenOtherParametersCameLate: on a store that answers a
// key's second Begin only after the key's answer is saved, the mismatch
// scenario's requests with other parameters were not answered during the
// first request, and it says so for every order; answered at once, it
// says nothing.
func TestMismatchSaysWhenOtherParametersCameLate(t *testing.T) {
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Minute}
	mismatch, ok := Lookup("mismatch")
	if !ok {
		t.Fatal("no mismatch scenario")
	}
	for _, late := range []bool{true, false} {
		mem, err := memory.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var st stores.Store = mem
		if late {
			st = &lateSecondBegin{Store: mem, begun: map[stores.KeyRef]int{}, saved: map[stores.KeyRef]chan struct{}{}}
		}
		env := NewEnv(Setup{Name: "mismatch", Store: st, Config: cfg, Clients: 3, Keys: 4, Seed: 1, RandSeed: 1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		mismatch.Run(ctx, env)
		cancel()
		notes := strings.Join(env.Record().NotTested, "\n")
		t.Logf("late %v: notes %q", late, notes)
		switch {
		case late && !strings.Contains(notes, "mismatch: ") || late && !strings.Contains(notes, ": 4 of 4 orders"):
			t.Errorf("the other parameters all came after the saves, but the notes say %q", notes)
		case !late && notes != "":
			t.Errorf("the other parameters met live claims, but the notes say %q", notes)
		}
	}
}
