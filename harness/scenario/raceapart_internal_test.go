package scenario

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// roundTrips is a correct store whose Begin makes a round trip
// (faults.BeforeRoundTrip), as a server's does; one at a time if
// serial (a store whose calls queue for one connection, or a machine
// too loaded to run two clients at once).
type roundTrips struct {
	stores.Store
	serial bool
	mu     sync.Mutex
}

func (s *roundTrips) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if s.serial {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	if err := faults.Hit(ctx, faults.BeforeRoundTrip); err != nil {
		return stores.Decision{}, err
	}
	return s.Store.Begin(ctx, req)
}

// TestRaceSaysWhenNoKeyWasRaced: on a store whose Begins run one at a
// time, no two of a key's clients were in the store at once, and the race
// scenario says, for every order, that it was not raced; on the same
// store with Begins at once it says nothing.
func TestRaceSaysWhenNoKeyWasRaced(t *testing.T) {
	cfg := stores.Config{LockTTL: 100 * time.Millisecond, Retention: time.Minute}
	for _, serial := range []bool{true, false} {
		mem, err := memory.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		wantNote(t, notesOf(t, "race", &roundTrips{Store: mem, serial: serial}, cfg, 3, 4), "race: no two of the key's clients were in the store at once", 4, serial)
	}
}
