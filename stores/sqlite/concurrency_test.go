package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// hammer runs Begin on every key from every goroutine of every store, in a
// different order per goroutine, all with the same clock reading (so no claim
// is ever stale), and returns who claimed each key. Any error fails the test:
// in particular SQLITE_BUSY must never surface.
func hammer(t *testing.T, ss []*Store, goroutines int, keys []stores.KeyRef, now time.Time) map[stores.KeyRef][]string {
	t.Helper()
	var (
		mu      sync.Mutex
		claimed = map[stores.KeyRef][]string{}
		wg      sync.WaitGroup
		errs    atomic.Int64
	)
	start := make(chan struct{})
	for si, s := range ss {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				order := rand.Perm(len(keys))
				<-start
				for _, i := range order {
					k := keys[i]
					d, err := s.Begin(context.Background(), req(k, "fp", now))
					if err != nil {
						if errs.Add(1) <= 5 {
							t.Errorf("store %d goroutine %d: Begin(%s): %v", si, g, k, err)
						}
						continue
					}
					switch d.Outcome {
					case stores.Claimed:
						mu.Lock()
						claimed[k] = append(claimed[k], fmt.Sprintf("store %d goroutine %d (takeover %v)", si, g, d.Takeover))
						mu.Unlock()
					case stores.InFlight:
					default:
						t.Errorf("Begin(%s) = %v, want claimed or in flight", k, d.Outcome)
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if n := errs.Load(); n > 0 {
		t.Fatalf("%d Begin calls failed", n)
	}
	return claimed
}

func exactlyOnce(t *testing.T, keys []stores.KeyRef, claimed map[stores.KeyRef][]string) {
	t.Helper()
	for _, k := range keys {
		if got := claimed[k]; len(got) != 1 {
			t.Errorf("key %s claimed %d times: %v", k, len(got), got)
		}
	}
}

func manyKeys(prefix string, n int) []stores.KeyRef {
	keys := make([]stores.KeyRef, n)
	for i := range keys {
		keys[i] = stores.KeyRef{Tenant: "acme", Key: fmt.Sprintf("%s-%04d", prefix, i)}
	}
	return keys
}

// TestConcurrentBeginOneStore: many goroutines on one pool.
func TestConcurrentBeginOneStore(t *testing.T) {
	s := open(t, "")
	keys := manyKeys("one", 100)
	start := time.Now()
	exactlyOnce(t, keys, hammer(t, []*Store{s}, 16, keys, t0))
	t.Logf("16 goroutines x %d keys: %v", len(keys), time.Since(start))
}

// TestConcurrentBeginManyStores: several Stores on one file, each with its own
// pool, as separate processes would have; their only coordination is SQLite's
// file locks.
func TestConcurrentBeginManyStores(t *testing.T) {
	p := dbPath(t)
	var ss []*Store
	for range 4 {
		ss = append(ss, openAt(t, p, ""))
	}
	keys := manyKeys("many", 100)
	start := time.Now()
	exactlyOnce(t, keys, hammer(t, ss, 8, keys, t0))
	t.Logf("4 stores x 8 goroutines x %d keys: %v", len(keys), time.Since(start))
}

// TestConcurrentTakeover: every key has a stale claim; all goroutines of all
// stores try to take it over at once. The compare-and-set lets exactly one
// win per key, and the old owner is fenced.
func TestConcurrentTakeover(t *testing.T) {
	p := dbPath(t)
	var ss []*Store
	for range 3 {
		ss = append(ss, openAt(t, p, ""))
	}
	keys := manyKeys("stale", 50)
	old := map[stores.KeyRef]stores.Token{}
	for _, k := range keys {
		old[k] = mustClaim(t, ss[0], req(k, "fp", t0), false)
	}
	claimed := hammer(t, ss, 6, keys, t0.Add(lockTTL))
	exactlyOnce(t, keys, claimed)
	for _, k := range keys {
		if err := ss[1].Complete(context.Background(), k, old[k], stores.Response{Status: 200}); !errors.Is(err, stores.ErrFenced) {
			t.Fatalf("old owner of %s not fenced after the takeover: %v", k, err)
		}
	}
}

// TestConcurrentRun: the whole Run flow from many stores and goroutines, with
// the work counted: each key's work runs exactly once, and every caller gets
// the work's answer, a replay of it, or 409.
func TestConcurrentRun(t *testing.T) {
	p := dbPath(t)
	var ss []*Store
	for range 3 {
		ss = append(ss, openAt(t, p, ""))
	}
	keys := manyKeys("run", 40)
	var runs sync.Map // key -> *atomic.Int64
	var wg sync.WaitGroup
	for si, s := range ss {
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, i := range rand.Perm(len(keys)) {
					k := keys[i]
					res, err := stores.Run(context.Background(), s, req(k, "fp", t0), stores.SaveError,
						func(context.Context, stores.Token) (stores.Response, error) {
							c, _ := runs.LoadOrStore(k, new(atomic.Int64))
							c.(*atomic.Int64).Add(1)
							return stores.Response{Status: 201, Body: "charged " + k.Key}, nil
						})
					switch {
					case errors.Is(err, stores.ErrInFlight):
					case err != nil:
						t.Errorf("store %d goroutine %d: Run(%s): %v", si, g, k, err)
					case res.Response.Body != "charged "+k.Key:
						t.Errorf("Run(%s) answered %+v", k, res)
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, k := range keys {
		c, ok := runs.Load(k)
		if !ok || c.(*atomic.Int64).Load() != 1 {
			t.Errorf("work for %s ran %v times, want once", k, c)
		}
	}
}

// TestBusy: a writer stuck inside Begin's write transaction (a takeover,
// held at the failpoint before its commit; a new key's claim is one
// statement, with no transaction to be stuck in) makes the other writers
// fail with ErrBusy once the busy timeout runs out,
// in the same Store (its writer queue) and in another Store on the file
// (SQLite's busy timeout), without writing anything; once it commits,
// everyone goes on.
func TestBusy(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := dbPath(t)
	var ss [2]*Store
	for i := range ss {
		s, err := newStore(context.Background(), p, testConfig(""), timeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ss[i] = s
	}
	other := mustClaim(t, ss[1], req(key("other"), "fp", t0), false)
	unseen := mustClaim(t, ss[1], req(key("unseen"), "fp", t0), false)
	mustClaim(t, ss[0], req(key("held"), "fp", t0), false)
	// Store 0 meets "other" (claimed by store 1) before the lock is held:
	// its first call claims first, then reads.
	if d := begin(t, ss[0], req(key("other"), "fp", t0)); d.Outcome != stores.InFlight {
		t.Fatalf("store 0: Begin(other) = %+v, want in-flight", d)
	}

	inside, release := make(chan struct{}), make(chan struct{})
	hold := faults.WithHandler(context.Background(), faults.HandlerFunc(func(_ context.Context, name string) error {
		if name == faults.BeginBeforeCommit {
			close(inside)
			<-release
		}
		return nil
	}))
	held := make(chan error, 1)
	go func() {
		d, err := ss[0].Begin(hold, req(key("held"), "fp", t0.Add(lockTTL)))
		if err == nil && (d.Outcome != stores.Claimed || !d.Takeover) {
			err = fmt.Errorf("held Begin = %+v, want taken over", d)
		}
		held <- err
	}()
	<-inside

	ctx := context.Background()
	for i, s := range ss {
		start := time.Now()
		_, err := s.Begin(ctx, req(key("blocked"), "fp", t0))
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("store %d: Begin while another writer holds the lock = %v, want ErrBusy", i, err)
		}
		if el := time.Since(start); el < timeout || el > 10*timeout {
			t.Errorf("store %d: gave up after %v, want about %v", i, el, timeout)
		}
		t.Logf("store %d: %v", i, err)
	}
	// A 409 on a live claim and a 422 on another fingerprint of a key the
	// store has seen only read: they are answered beside the writer, from
	// either store.
	for i, s := range ss {
		for fp, want := range map[string]stores.Outcome{"fp": stores.InFlight, "other-fp": stores.Mismatch} {
			d, err := s.Begin(ctx, req(key("other"), fp, t0))
			if err != nil || d.Outcome != want {
				t.Fatalf("store %d: Begin(other, %s) while another writer holds the lock = %+v, %v; want %v from the read", i, fp, d, err, want)
			}
		}
	}
	// The first call of a store on a key it has not seen claims first, and
	// waits for the write lock: busy, having written nothing; the read
	// after it finds store 1's live claim, a 409 (afterBusy).
	start := time.Now()
	if d, err := ss[0].Begin(ctx, req(key("unseen"), "fp", t0)); err != nil || d.Outcome != stores.InFlight {
		t.Fatalf("store 0: Begin(unseen) while another writer holds the lock = %+v, %v; want in-flight from the read after the busy wait", d, err)
	}
	if el := time.Since(start); el < timeout {
		t.Errorf("store 0: Begin(unseen) answered after %v, before the busy timeout %v: it did not wait for the write lock", el, timeout)
	}
	if err := ss[1].Complete(ctx, key("other"), other, stores.Response{Status: 200}); !errors.Is(err, ErrBusy) {
		t.Fatalf("Complete while another writer holds the lock = %v, want ErrBusy", err)
	}
	// A cancelled caller stops waiting at once.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := ss[0].Begin(cctx, req(key("blocked"), "fp", t0)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Begin with a deadline = %v, want DeadlineExceeded", err)
	}

	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if n := rowCount(t, ss[0], key("blocked")); n != 0 {
		t.Fatalf("busy Begins left %d rows", n)
	}
	mustClaim(t, ss[1], req(key("blocked"), "fp", t0), false)
	if err := ss[0].Complete(ctx, key("other"), other, stores.Response{Status: 200}); err != nil {
		t.Fatalf("Complete after the lock was released: %v", err)
	}
	if err := ss[1].Complete(ctx, key("unseen"), unseen, stores.Response{Status: 200}); err != nil {
		t.Fatalf("Complete of unseen after the lock was released: %v", err)
	}
}
