package servers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	redisstore "github.com/idemcheck/idemcheck/stores/redis"
)

// durabilityCounts is what a store remembered across a server kill.
type durabilityCounts struct {
	claims, done         int // before the kill
	inFlight, replays    int // after: claims still in flight, answers replayed
	lostClaims, lostDone int // after: keys claimed afresh (forgotten)
	staleErrors          int // failed calls after the server answered again
}

// killAndCount claims n keys on the store (LockTTL long enough that a
// claim stays in flight across the restart), saves an answer for half of
// them, kills the server with SIGKILL, starts it again, and asks each key.
func killAndCount(t *testing.T, srv *servers.Server, variant string, n int) durabilityCounts {
	t.Helper()
	ctx := context.Background()
	b, err := stores.Lookup(string(srv.Kind))
	if err != nil {
		t.Fatal(err)
	}
	cfg := stores.Config{LockTTL: time.Minute, Retention: time.Hour, Variant: variant, Namespace: fmt.Sprintf("dur_%d", time.Now().UnixNano()%1e9)}
	st, err := b.Open(ctx, srv.Addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sf, err := servers.NewFaults(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	portBefore, err := sf.HostPort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var c durabilityCounts
	key := func(i int) stores.Request {
		return stores.Request{KeyRef: stores.KeyRef{Tenant: "dur", Key: fmt.Sprintf("k%03d", i)}, Fingerprint: "fp", Now: time.Now()}
	}
	for i := 0; i < n; i++ {
		d, err := st.Begin(ctx, key(i))
		if err != nil || d.Outcome != stores.Claimed {
			t.Fatalf("claim %d: %+v, %v", i, d, err)
		}
		c.claims++
		if i%2 == 0 {
			if err := st.Complete(ctx, key(i).KeyRef, d.Token, stores.Response{Status: 201, Body: fmt.Sprint("answer ", i)}); err != nil {
				t.Fatalf("complete %d: %v", i, err)
			}
			c.done++
		}
	}
	down, err := sf.Restart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	portAfter, err := sf.HostPort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if portAfter != portBefore {
		t.Errorf("the server's port moved across the restart: %s, then %s", portBefore, portAfter)
	}
	t.Logf("%s restarted in %v (port %s)", srv.Kind, down.Round(time.Millisecond), portAfter)
	// The store was open across the restart: its broken connections may
	// fail a few calls, never more than its pool holds, then it must answer.
	for i := 0; i < n; i++ {
		var d stores.Decision
		for attempt := 0; ; attempt++ {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			d, err = st.Begin(cctx, key(i))
			cancel()
			if err == nil {
				break
			}
			c.staleErrors++
			if attempt == 40 {
				t.Fatalf("key %d: the store still fails after the server came back: %v", i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		switch {
		case i%2 == 0 && d.Outcome == stores.Replay && d.Response.Body == fmt.Sprint("answer ", i):
			c.replays++
		case i%2 == 1 && d.Outcome == stores.InFlight:
			c.inFlight++
		case d.Outcome == stores.Claimed && !d.Takeover && i%2 == 0:
			c.lostDone++
		case d.Outcome == stores.Claimed && !d.Takeover:
			c.lostClaims++
		default:
			t.Errorf("key %d after the restart: %+v", i, d)
		}
	}
	return c
}

// TestServerKillDurability: Postgres and Redis with appendfsync always
// lose no claim and no saved answer across kill -9 and a restart (on the
// same port; the open store reconnects by itself); redis-no-persistence
// loses them all.
func TestServerKillDurability(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		kind    servers.Kind
		variant string
		lossy   bool
	}{
		{servers.Postgres, stores.Correct, false},
		{servers.Redis, stores.Correct, false},
		{servers.Redis, redisstore.NoPersistence, true},
	} {
		t.Run(string(tc.kind)+"/"+tc.variant, func(t *testing.T) {
			t.Parallel()
			srv := servers.ForTestOptions(t, tc.kind, servers.Options{Container: true})
			c := killAndCount(t, srv, tc.variant, n)
			t.Logf("claims before: %d (%d with a saved answer); after kill -9: %d in flight, %d replayed; lost: %d claims, %d answers; %d failed calls while reconnecting",
				c.claims, c.done, c.inFlight, c.replays, c.lostClaims, c.lostDone, c.staleErrors)
			switch {
			case !tc.lossy && (c.inFlight != n/2 || c.replays != n/2):
				t.Errorf("lost claims or answers across kill -9: %+v", c)
			case tc.lossy && c.lostClaims+c.lostDone != n:
				t.Errorf("%s kept %d of %d keys across kill -9: the mutant does not re-create the bug", tc.variant, n-c.lostClaims-c.lostDone, n)
			}
			if c.staleErrors > 20 {
				t.Errorf("%d failed calls after the server came back: stale connections linger", c.staleErrors)
			}
		})
	}
}

// TestServerPause: while the server is frozen, calls end at their deadline
// (an unknown outcome); once it is thawed, the store answers again.
func TestServerPause(t *testing.T) {
	for _, kind := range []servers.Kind{servers.Postgres, servers.Redis} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			srv := servers.ForTestOptions(t, kind, servers.Options{Container: true})
			ctx := context.Background()
			b, _ := stores.Lookup(string(kind))
			st, err := b.Open(ctx, srv.Addr, stores.Config{LockTTL: time.Second, Retention: time.Hour, Variant: stores.Correct, Namespace: "pause"})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			sf, err := servers.NewFaults(srv)
			if err != nil {
				t.Fatal(err)
			}
			defer sf.Close()
			req := stores.Request{KeyRef: stores.KeyRef{Tenant: "p", Key: "k"}, Fingerprint: "fp", Now: time.Now()}
			if err := sf.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			_, err = workload.WithDeadline(st, 300*time.Millisecond).Begin(ctx, req)
			took := time.Since(t0)
			if err == nil || history.NoEffect(err) {
				t.Errorf("Begin on a frozen server: err %v, want a timeout (unknown outcome)", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("error on the frozen server: %v", err)
			}
			if took > 5*time.Second {
				t.Errorf("Begin on a frozen server took %v", took)
			}
			if err := sf.Heal(ctx); err != nil {
				t.Fatal(err)
			}
			// A resume that finds the server thawed already (a pause that
			// a slow daemon never made, a kill that ended it) is no error,
			// and neither is healing a healthy server.
			if err := sf.Resume(ctx); err != nil {
				t.Errorf("resume of a server that is not paused: %v", err)
			}
			if err := sf.Heal(ctx); err != nil {
				t.Errorf("heal of a healthy server: %v", err)
			}
			for attempt := 0; ; attempt++ {
				_, err = workload.WithDeadline(st, 5*time.Second).Begin(ctx, req)
				if err == nil {
					break
				}
				if attempt == 20 {
					t.Fatalf("the store does not answer after the server was thawed: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("frozen call ended after %v; answered again after the thaw", took.Round(time.Millisecond))
		})
	}
}

// TestFaultsNeedAContainerOfOurs: a server from the environment cannot
// be faulted, and says why.
func TestFaultsNeedAContainerOfOurs(t *testing.T) {
	srv := &servers.Server{Kind: servers.Postgres, Addr: "postgres://x", Source: "env"}
	if why := srv.NoFaults(); !strings.Contains(why, "environment") {
		t.Errorf("server from the environment: %q", why)
	}
	if _, err := servers.NewFaults(srv); err == nil {
		t.Error("NewFaults accepted a server from the environment")
	}
}
