package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/internal/seen"
)

// TestBeginSendsTheStatementTheHintNames: a Begin whose first statement
// decides takes one round trip (a new key's claim, a retry's 409, 422
// and replay), and one it does not takes two and still decides right (a
// key another process made, a takeover of the Store's own claim), on
// the schema's function, when the function was dropped under the store
// and on the two statements a role that may make no function sends. A
// replay decided after a claim that found the row wrote nothing.
func TestBeginSendsTheStatementTheHintNames(t *testing.T) {
	const ttl = 200 * time.Millisecond
	s := newStore(t, stores.Correct, ttl, hour)
	wantPath(t, s, "schema")
	var trips atomic.Int64
	ctx := faults.WithHandler(ctxT(t), faults.HandlerFunc(func(_ context.Context, name string) error {
		if name == faults.BeforeRoundTrip {
			trips.Add(1)
		}
		return nil
	}))
	begin := func(key, fp string, want stores.Outcome, wantTrips int64) stores.Decision {
		t.Helper()
		trips.Store(0)
		d, err := s.Begin(ctx, req(key, fp))
		if err != nil {
			t.Fatalf("Begin(%s, %s): %v", key, fp, err)
		}
		wantOutcome(t, d, want)
		if n := trips.Load(); n != wantTrips {
			t.Fatalf("Begin(%s, %s) answered %v in %d round trips, want %d", key, fp, want, n, wantTrips)
		}
		return d
	}

	c := begin("k", "fp", stores.Claimed, 1) // a new key: the claim alone
	begin("k", "fp", stores.InFlight, 1)     // a retry: the read alone
	begin("k", "other", stores.Mismatch, 1)
	resp := stores.Response{Status: 201, Body: "ch_1"}
	if err := s.Complete(ctxT(t), ref("k"), c.Token, resp); err != nil {
		t.Fatal(err)
	}
	if d := begin("k", "fp", stores.Replay, 1); d.Response != resp {
		t.Fatalf("replay %+v, want %+v", d.Response, resp)
	}

	// Another process's key: this Store has not seen it (a new hint
	// forgets every key), so the claim goes first, finds the row and
	// writes nothing, and the function answers.
	version := func() string { return rowVersion(t, s, "k") }
	before := version()
	s.seen = seen.New()
	if d := begin("k", "fp", stores.Replay, 2); d.Response != resp {
		t.Fatalf("replay %+v, want %+v", d.Response, resp)
	}
	if after := version(); after != before {
		t.Fatalf("a claim that found the row rewrote it: version %s, then %s", before, after)
	}
	begin("k", "fp", stores.Replay, 1) // seen now

	// The Store's own claim gone stale: the read has no answer, and the
	// function takes it over.
	begin("stale", "fp", stores.Claimed, 1)
	time.Sleep(2 * ttl)
	if d := begin("stale", "fp", stores.Claimed, 2); !d.Takeover {
		t.Fatalf("a stale claim was claimed again without a takeover: %+v", d)
	}

	// The function dropped under the store: a key not seen is claimed,
	// the call finds no function, and the read answers.
	dropBeginFunc(t, s)
	s.seen = seen.New()
	begin("k", "fp", stores.Replay, 3)
	if after := version(); after != before {
		t.Fatalf("a claim that found the row rewrote it: version %s, then %s", before, after)
	}

	// Without the function (a role that may make none): the read, then
	// beginSQL, for a key seen or not.
	s.plainBegin.Store(true)
	begin("plain", "fp", stores.Claimed, 2)
	begin("plain", "fp", stores.InFlight, 1)
}
