package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults/netfault"
	"github.com/idemcheck/idemcheck/stores"
)

const (
	long  = time.Hour              // a LockTTL or Retention no test reaches
	short = 300 * time.Millisecond // a LockTTL a test sleeps past
	past  = short + 80*time.Millisecond
)

func ref(key string) stores.KeyRef { return stores.KeyRef{Tenant: "acme", Key: key} }

func req(key, fp string) stores.Request {
	return stores.Request{KeyRef: ref(key), Fingerprint: fp}
}

// begin calls Begin and fails the test on an error.
func begin(t *testing.T, s stores.Store, r stores.Request) stores.Decision {
	t.Helper()
	d, err := s.Begin(context.Background(), r)
	if err != nil {
		t.Fatalf("begin %v: %v", r.KeyRef, err)
	}
	return d
}

func want(t *testing.T, d stores.Decision, o stores.Outcome) {
	t.Helper()
	if d.Outcome != o {
		t.Fatalf("outcome %v, want %v (%+v)", d.Outcome, o, d)
	}
}

func TestRegistered(t *testing.T) {
	b, err := stores.Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	if b.Clock != stores.ServerClock {
		t.Errorf("clock %v, want server", b.Clock)
	}
	// The scripts table and the catalogue's rows for redis agree: every
	// store-side mutant has scripts, the configuration one runs the
	// correct scripts.
	for _, m := range b.Mutants {
		row, _ := stores.LookupMutant(m)
		if _, ok := variants[m]; ok != (row.Side == stores.StoreSide) {
			t.Errorf("%s mutant %s: scripts %v", row.Side, m, ok)
		}
	}
	if !b.HasVariant(NoPersistence) {
		t.Errorf("%s is not registered", NoPersistence)
	}
	for name := range variants {
		if name != stores.Correct && !b.HasVariant(name) {
			t.Errorf("variant %s has scripts but no row of stores.Catalogue on redis", name)
		}
	}
	r, err := stores.Lookup("redis-replicated")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Mutants, []string{AsyncReplication}) {
		t.Errorf("redis-replicated's mutants %v, want %s, the one it implements", r.Mutants, AsyncReplication)
	}
}

// TestMutantScriptsAreSmallEdits checks that every mutant's scripts differ
// from the correct ones in at most two lines, so each bug stays readable.
func TestMutantScriptsAreSmallEdits(t *testing.T) {
	correct := scriptSets[stores.Correct]
	diff := func(a, b string) int {
		al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
		if len(al) != len(bl) {
			return 1 << 10
		}
		n := 0
		for i := range al {
			if al[i] != bl[i] {
				n++
			}
		}
		return n
	}
	for _, m := range storeSide() {
		ss := scriptSets[m]
		n := diff(correct.begin.src, ss.begin.src) + diff(correct.complete.src, ss.complete.src) + diff(correct.release.src, ss.release.src)
		if ss.second != nil {
			n += diff(correct.begin.src, ss.second.src)
		}
		switch m {
		case "case-folded-key", "tenant-blind", "joined-key", "fingerprint-drops-amount", "prune-sweeps-in-flight":
			if n != 0 { // their bug is in Go (stores.StoredKey, stores.StoredFingerprint, Prune), not in a script
				t.Errorf("%s differs from the correct scripts in %d lines, want none", m, n)
			}
		default:
			if n < 1 || n > 2 {
				t.Errorf("%s differs from the correct scripts in %d lines, want 1 or 2", m, n)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	cfg := stores.Config{LockTTL: time.Second, Retention: time.Hour}
	if _, err := New(ctx, "127.0.0.1:1", cfg); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("unreachable server: err = %v", err)
	}
	if _, err := New(ctx, "redis://[bad", cfg); err == nil {
		t.Error("bad URL accepted")
	}
	if _, err := New(ctx, "", cfg); err == nil {
		t.Error("empty address accepted")
	}
}

// testOpenConfigErrors: a reachable server does not rescue a bad config.
func testOpenConfigErrors(t *testing.T, addr string) {
	ctx := context.Background()
	cfg := stores.Config{LockTTL: time.Second, Retention: time.Hour}
	bad := cfg
	bad.Variant = "no-such-bug"
	if _, err := New(ctx, addr, bad); err == nil || !strings.Contains(err.Error(), "unknown variant") {
		t.Errorf("unknown variant: err = %v", err)
	}
	bad = cfg
	bad.Namespace = "a:b"
	if _, err := New(ctx, addr, bad); err == nil {
		t.Error("namespace with ':' accepted")
	}
	bad = cfg
	bad.LockTTL = 0
	if _, err := New(ctx, addr, bad); err == nil {
		t.Error("zero lock TTL accepted")
	}
}

func testOpenURL(t *testing.T, addr string) {
	if strings.Contains(addr, "://") {
		t.Skip("address is already a URL")
	}
	s := openNS(t, "redis://"+addr+"/0?max_retries=5", stores.Correct, freshNamespace(), long, long)
	if s.rdb.Options().MaxRetries != 0 { // -1 normalised: no retries
		t.Errorf("MaxRetries = %d after the URL asked for 5, want 0", s.rdb.Options().MaxRetries)
	}
	want(t, begin(t, s, req("k", "f")), stores.Claimed)
}

func TestJudgeDurability(t *testing.T) {
	for _, c := range []struct {
		aof, fsync string
		safe       bool
	}{{"yes", "always", true}, {"yes", "everysec", false}, {"no", "always", false}, {"no", "no", false}} {
		desc, err := judgeDurability(c.aof, c.fsync)
		if (err == nil) != c.safe || (err != nil && !errors.Is(err, ErrNotDurable)) || !strings.Contains(desc, c.fsync) {
			t.Errorf("%s/%s: %q, %v", c.aof, c.fsync, desc, err)
		}
	}
}

// testDurability: Open reads the server's settings; unsafe ones are reported,
// not refused.
func testDurability(t *testing.T, addr string) {
	s := open(t, addr, stores.Correct, long, long)
	desc, err := s.Durability()
	t.Logf("server durability: %s (%v)", desc, err)
	if (err == nil) != (desc == "appendonly=yes appendfsync=always") {
		t.Errorf("Durability() = %q, %v", desc, err)
	}
}

// testConcurrentClaim: 32 clients race on each of many keys; exactly one
// claims each key, the others see it in flight, and nobody gets an error.
func testConcurrentClaim(t *testing.T, addr string) {
	t.Parallel()
	s := open(t, addr, stores.Correct, long, long)
	const clients, keys = 32, 40
	var claimed [keys]atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, clients*keys)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for k := 0; k < keys; k++ {
				d, err := s.Begin(context.Background(), req(fmt.Sprint("k", k), "f"))
				switch {
				case err != nil:
					errs <- err
				case d.Outcome == stores.Claimed:
					claimed[k].Add(1)
				case d.Outcome != stores.InFlight:
					errs <- fmt.Errorf("key %d: outcome %v", k, d.Outcome)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for k := range claimed {
		if n := claimed[k].Load(); n != 1 {
			t.Errorf("key %d claimed %d times, want 1", k, n)
		}
	}
}

// testDecisionTable walks every row of the decision table on one key.
func testDecisionTable(t *testing.T, addr string) {
	t.Parallel()
	s := open(t, addr, stores.Correct, long, long)
	ctx := context.Background()
	before := time.Now()
	// Request.Now is ignored: the server's clock decides.
	r := stores.Request{KeyRef: ref("order-1"), Fingerprint: "fp-a", Now: time.Unix(0, 0)}
	d := begin(t, s, r)
	want(t, d, stores.Claimed)
	if d.Takeover || len(d.Token) != 32 {
		t.Errorf("claim: %+v", d)
	}
	if d.DecidedAt.Before(before.Add(-2*time.Second)) || d.DecidedAt.After(time.Now().Add(2*time.Second)) {
		t.Errorf("DecidedAt %v is not the server's clock (now %v)", d.DecidedAt, time.Now())
	}
	if d.DecidedAt.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("DecidedAt %v not in whole ms", d.DecidedAt)
	}
	// in flight, same or other fingerprint
	want(t, begin(t, s, r), stores.InFlight)
	want(t, begin(t, s, req("order-1", "fp-b")), stores.Mismatch)
	// done: replay, byte for byte
	resp := stores.Response{Status: 201, Body: "charged\x00 \xff\xfe ✓"}
	if err := s.Complete(ctx, r.KeyRef, d.Token, resp); err != nil {
		t.Fatal(err)
	}
	got := begin(t, s, r)
	want(t, got, stores.Replay)
	if got.Response != resp {
		t.Errorf("replayed %+v, want %+v", got.Response, resp)
	}
	if !got.DecidedAt.After(d.DecidedAt) && !got.DecidedAt.Equal(d.DecidedAt) {
		t.Errorf("time ran backwards: %v then %v", d.DecidedAt, got.DecidedAt)
	}
	want(t, begin(t, s, req("order-1", "fp-b")), stores.Mismatch)
	// a done key is fenced for every later write, its owner's included
	if err := s.Complete(ctx, r.KeyRef, d.Token, stores.Response{Status: 500}); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("second complete: %v, want ErrFenced", err)
	}
	if err := s.Release(ctx, r.KeyRef, d.Token); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("release after complete: %v, want ErrFenced", err)
	}
	want(t, begin(t, s, r), stores.Replay)
	// an empty body replays as empty
	d2 := begin(t, s, req("order-2", "f"))
	if err := s.Complete(ctx, ref("order-2"), d2.Token, stores.Response{Status: 204}); err != nil {
		t.Fatal(err)
	}
	if got := begin(t, s, req("order-2", "f")); got.Response != (stores.Response{Status: 204}) {
		t.Errorf("empty body: %+v", got)
	}
	// writes to a key nobody claimed are fenced
	if err := s.Complete(ctx, ref("never"), "x", resp); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("complete unclaimed: %v", err)
	}
	if err := s.Release(ctx, ref("never"), "x"); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("release unclaimed: %v", err)
	}
}

// testRelease: a released key is claimed afresh with a new token, and the
// old token is fenced.
func testRelease(t *testing.T, addr string) {
	t.Parallel()
	s := open(t, addr, stores.Correct, long, long)
	ctx := context.Background()
	a := begin(t, s, req("k", "f"))
	if err := s.Release(ctx, ref("k"), "not-the-token"); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("release with a wrong token: %v", err)
	}
	want(t, begin(t, s, req("k", "f")), stores.InFlight) // left alone
	if err := s.Release(ctx, ref("k"), a.Token); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, ref("k"), a.Token); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("second release: %v", err)
	}
	b := begin(t, s, req("k", "other-fp")) // the released key is new: any fingerprint
	want(t, b, stores.Claimed)
	if b.Takeover || b.Token == a.Token {
		t.Errorf("fresh claim after release: %+v (old token %s)", b, a.Token)
	}
	if err := s.Complete(ctx, ref("k"), a.Token, stores.Response{Status: 200}); !errors.Is(err, stores.ErrFenced) {
		t.Errorf("complete with the released token: %v", err)
	}
}

// testTenantScoping: the same key in two tenants is two keys, and no choice
// of tenant and key bytes (':' included) makes two pairs collide.
func testTenantScoping(t *testing.T, addr string) {
	t.Parallel()
	s := open(t, addr, stores.Correct, long, long)
	pairs := []stores.KeyRef{
		{Tenant: "a", Key: "k"}, {Tenant: "b", Key: "k"}, {Tenant: "", Key: "k"},
		{Tenant: "a:b", Key: "c"}, {Tenant: "a", Key: "b:c"}, {Tenant: "a:", Key: "b:c"},
		{Tenant: "", Key: "a:b:c"}, {Tenant: "1:a", Key: "k"}, {Tenant: "1", Key: "a:k"},
		{Tenant: "a\x00", Key: "k"}, {Tenant: "a", Key: "\x00k"},
	}
	seen := map[string]stores.KeyRef{}
	for _, p := range pairs {
		name := s.redisKey(p)
		if q, dup := seen[name]; dup {
			t.Fatalf("%q and %q both map to %q", p, q, name)
		}
		seen[name] = p
		d := begin(t, s, stores.Request{KeyRef: p, Fingerprint: "f"})
		if d.Outcome != stores.Claimed {
			t.Errorf("%q: %v, want claimed (another tenant's key leaked in)", p, d.Outcome)
		}
	}
	// Another namespace on the same server shares nothing.
	other := open(t, addr, stores.Correct, long, long)
	want(t, begin(t, other, stores.Request{KeyRef: pairs[0], Fingerprint: "f"}), stores.Claimed)
}

// testKeys: keys of 1..255 arbitrary bytes work; 0 and 256+ are invalid for
// every operation.
func testKeys(t *testing.T, addr string) {
	t.Parallel()
	s := open(t, addr, stores.Correct, long, long)
	ctx := context.Background()
	for _, k := range []string{"\x00", "\x00\x01", "\xff\xfe\xfd", "bad utf-8 \xc3\x28", strings.Repeat("x", 255), "*", "[a-z]?", "{tag}"} {
		d := begin(t, s, req(k, "f"))
		want(t, d, stores.Claimed)
		if err := s.Complete(ctx, ref(k), d.Token, stores.Response{Status: 200, Body: k}); err != nil {
			t.Fatalf("%q: %v", k, err)
		}
		if got := begin(t, s, req(k, "f")); got.Response.Body != k {
			t.Errorf("%q replayed %q", k, got.Response.Body)
		}
	}
	for _, k := range []string{"", strings.Repeat("x", 256), strings.Repeat("é", 200)} {
		if _, err := s.Begin(ctx, req(k, "f")); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("begin %d bytes: %v", len(k), err)
		}
		if err := s.Complete(ctx, ref(k), "t", stores.Response{}); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("complete %d bytes: %v", len(k), err)
		}
		if err := s.Release(ctx, ref(k), "t"); !errors.Is(err, stores.ErrInvalidKey) {
			t.Errorf("release %d bytes: %v", len(k), err)
		}
	}
}

// testRetentionExpiry: a key expires Retention after its first claim, done
// or not; Complete does not extend it; Prune has nothing to do. What needs
// the key alive (Complete, the replays, Prune) runs on an hour's retention:
// on a loaded machine (CI: a 0.5-3 s deschedule) a 600 ms one can run out
// before them. The expiry is watched on a 600 ms retention, where a key
// found gone by its Complete is excused only once the server's clock says
// the retention had passed.
func testRetentionExpiry(t *testing.T, addr string) {
	t.Parallel()
	const retention = 600 * time.Millisecond
	ctx := context.Background()
	pttl := func(s *Store, k string) time.Duration {
		v, err := s.rdb.PTTL(ctx, s.redisKey(ref(k))).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	kept := open(t, addr, stores.Correct, long, long)
	d := begin(t, kept, req("done", "f"))
	if p := pttl(kept, "done"); p <= 0 || p > long {
		t.Errorf("PTTL after claim %v, want (0, %v]", p, long)
	}
	time.Sleep(200 * time.Millisecond)
	if err := kept.Complete(ctx, ref("done"), d.Token, stores.Response{Status: 200}); err != nil {
		t.Fatal(err)
	}
	if p := pttl(kept, "done"); p <= 0 || p > long-150*time.Millisecond {
		t.Errorf("PTTL after complete %v: Complete must keep the claim's expiry", p)
	}
	want(t, begin(t, kept, req("done", "f")), stores.Replay)
	if n, err := kept.Prune(ctx, time.Now().Add(24*time.Hour)); n != 0 || err != nil {
		t.Errorf("Prune = %d, %v; want 0, nil", n, err)
	}
	want(t, begin(t, kept, req("done", "f")), stores.Replay) // Prune removed nothing

	s := open(t, addr, stores.Correct, long, retention)
	d = begin(t, s, req("done", "f"))
	begin(t, s, req("in-flight", "f"))
	if p := pttl(s, "done"); p == -1 || p > retention { // -2: gone already
		t.Errorf("PTTL after claim %v, want at most %v", p, retention)
	}
	if err := s.Complete(ctx, ref("done"), d.Token, stores.Response{Status: 200}); err != nil {
		now, terr := s.rdb.Time(ctx).Result()
		if !errors.Is(err, stores.ErrFenced) || terr != nil || now.Sub(d.DecidedAt) < retention {
			t.Fatalf("complete inside the retention: %v (server clock: %v, %v)", err, now, terr)
		}
		t.Logf("the key expired before its Complete (a loaded machine): %v", err)
	}
	time.Sleep(retention)
	for _, k := range []string{"done", "in-flight"} {
		if p := pttl(s, k); p != -2 {
			t.Errorf("%s: PTTL %v after retention, want gone", k, p)
		}
		d := begin(t, s, req(k, "other"))
		if d.Outcome != stores.Claimed || d.Takeover {
			t.Errorf("%s after retention: %+v, want a fresh claim", k, d)
		}
	}
}

// testScriptCacheLoss: after SCRIPT FLUSH (as after a server restart) every
// operation reloads its script and succeeds.
func testScriptCacheLoss(t *testing.T, addr string) {
	s := open(t, addr, stores.Correct, long, long)
	ctx := context.Background()
	flush := func() {
		if err := s.rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	d := begin(t, s, req("k", "f"))
	want(t, d, stores.Claimed)
	flush()
	if err := s.Complete(ctx, ref("k"), d.Token, stores.Response{Status: 200}); err != nil {
		t.Fatal(err)
	}
	want(t, begin(t, s, req("k", "f")), stores.Replay)
	d = begin(t, s, req("k2", "f"))
	flush()
	if err := s.Release(ctx, ref("k2"), d.Token); err != nil {
		t.Fatal(err)
	}
	want(t, begin(t, s, req("k2", "f")), stores.Claimed)
}

func testContextErrors(t *testing.T, addr string) {
	t.Parallel()
	s := open(t, addr, stores.Correct, long, long)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d, err := s.Begin(ctx, req("k", "f")); err == nil {
		t.Errorf("begin on a canceled context: %+v, want an error", d)
	}
	if err := s.Complete(ctx, ref("k"), "t", stores.Response{}); err == nil || errors.Is(err, stores.ErrFenced) {
		t.Errorf("complete on a canceled context: %v, want a non-fencing error", err)
	}
	closed := open(t, addr, stores.Correct, long, long)
	closed.Close()
	if _, err := closed.Begin(context.Background(), req("k", "f")); err == nil {
		t.Error("begin on a closed store succeeded")
	}
}

// testLostReply: when the reply to Begin is lost after the script ran, the
// caller gets an error (an unknown outcome), not a silent resend whose answer
// ("in flight": its own claim) would hide that it owns the key.
func testLostReply(t *testing.T, addr string) {
	t.Parallel()
	if strings.Contains(addr, "://") {
		t.Skip("proxying needs a host:port address")
	}
	p, err := netfault.Start("redis-lost-reply", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ns := freshNamespace()
	s := openNS(t, p.Addr(), stores.Correct, ns, long, long)
	direct := openNS(t, addr, stores.Correct, ns, long, long)
	if err := p.LoseNextReply(); err != nil {
		t.Fatal(err)
	}
	d, err := s.Begin(context.Background(), req("k", "f"))
	if err == nil {
		t.Fatalf("begin with a lost reply answered %+v, want an error", d)
	}
	t.Logf("lost reply surfaced as: %v", err)
	// The script did run: the key is claimed, by the caller that saw an error.
	want(t, begin(t, direct, req("k", "f")), stores.InFlight)
	// The store keeps working on a fresh connection.
	want(t, begin(t, s, req("k2", "f")), stores.Claimed)
}
