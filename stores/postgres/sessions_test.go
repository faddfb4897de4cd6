package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemcheck/idemcheck/stores"
)

// ownDSN is the shared server's DSN with an application_name of the
// test's own: its stores connect unlike every other test's, so the
// sessions they share are theirs alone.
func ownDSN(t *testing.T, extra ...string) string {
	t.Helper()
	u, err := url.Parse(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	q := u.Query()
	q.Set("application_name", "idemtest-"+hex.EncodeToString(b[:]))
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TestStoresOnOneDSNShareSessions: stores opened one after another on
// the same DSN, each on a schema of its own, answer on the same sessions
// (a run opens a store per scenario, and each new session is a forked
// server process), while a DSN that sizes its pool gets one of its own.
func TestStoresOnOneDSNShareSessions(t *testing.T) {
	t.Parallel()
	dsn := ownDSN(t)
	ctx := ctxT(t)
	var pool *pgxpool.Pool
	for i := range 8 {
		s, err := New(ctx, dsn, correctConfig(t, dsn))
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, mustBegin(t, s, req("k", "fp")), stores.Claimed)
		if i == 0 {
			// The first store stays open to the end, so that no stall of
			// a loaded machine between one store's Close and the next
			// one's New outlasts the pool's linger.
			pool = s.pool
			defer s.Close()
			continue
		}
		if s.pool != pool {
			t.Errorf("store %d has a pool of its own", i)
		}
		s.Close()
	}
	if n := pool.Stat().NewConnsCount(); n > 2 {
		t.Errorf("8 stores opened %d sessions one after another, want at most 2", n)
	}
	sized := ownDSN(t, "pool_max_conns", "2")
	a, err := New(ctx, sized, correctConfig(t, testDSN(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(ctx, sized, correctConfig(t, testDSN(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.pool == b.pool || a.slots != nil {
		t.Errorf("stores whose DSN sets pool_max_conns share a pool")
	}
}

// TestSharedPoolClosesAfterItsLastStore: a shared pool outlives its last
// store by its linger, for the next store to take it again, and is closed
// once that passes with none.
func TestSharedPoolClosesAfterItsLastStore(t *testing.T) {
	t.Parallel()
	pcfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	key := "test:" + t.Name()
	// Long enough that the store opened right after the release finds the
	// pool still there on a loaded machine (make test's CI: a 0.5-3 s
	// deschedule; at 100 ms the pool could close in between). The close
	// phase polls, so a longer linger costs only its own wait.
	const linger = 2 * time.Second
	p1, release1, err := sharedSessions(ctx, key, pcfg.Copy(), linger)
	if err != nil {
		t.Fatal(err)
	}
	release1()
	release1() // a store closed twice lets go once
	p2, release2, err := sharedSessions(ctx, key, pcfg.Copy(), linger)
	if err != nil {
		t.Fatal(err)
	}
	if p2 != p1 {
		t.Fatal("a store opened within the linger got a new pool")
	}
	time.Sleep(linger + linger/2) // past the first release's timer, which must not close a held pool
	if err := p1.Ping(ctx); err != nil {
		t.Fatalf("the pool closed while a store held it: %v", err)
	}
	release2()
	deadline := time.Now().Add(10 * time.Second)
	for p1.Ping(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the pool still answers 10 s after its last store let it go")
		}
		time.Sleep(linger)
	}
	pools.Lock()
	_, kept := pools.m[key]
	pools.Unlock()
	if kept {
		t.Error("the closed pool is still listed")
	}
}

// TestSlotsBoundAStoreOnASharedPool: a store on a shared pool has no more
// calls in flight than a pool of its own would give it; a call that finds
// none free before its context ends sent nothing (stores.ErrNotApplied),
// and another store on the same pool is not held up.
func TestSlotsBoundAStoreOnASharedPool(t *testing.T) {
	t.Parallel()
	dsn := ownDSN(t)
	ctx := ctxT(t)
	a, err := New(ctx, dsn, correctConfig(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(ctx, dsn, correctConfig(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if cap(a.slots) != defaultMaxConns {
		t.Fatalf("a store on a shared pool has %d slots, want %d", cap(a.slots), defaultMaxConns)
	}
	for range defaultMaxConns {
		a.slots <- struct{}{}
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := a.Begin(short, req("k", "fp")); !errors.Is(err, stores.ErrNotApplied) {
		t.Errorf("Begin with every slot held: %v, want ErrNotApplied", err)
	}
	wantOutcome(t, mustBegin(t, b, req("k", "fp")), stores.Claimed)
	for range defaultMaxConns {
		<-a.slots
	}
	// Nothing of the refused call reached the server: a's key is free.
	wantOutcome(t, mustBegin(t, a, req("k", "fp")), stores.Claimed)
}
