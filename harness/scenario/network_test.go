package scenario_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/nemesis"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// TestNetworkScenarios: through a proxy, lost replies and resets make
// unknown outcomes that clients retry with the same key, and every checker
// still passes on the correct Postgres and Redis stores.
func TestNetworkScenarios(t *testing.T) {
	for _, name := range []string{"postgres", "redis"} {
		t.Run(name, func(t *testing.T) {
			o := harnesstest.Options(t, name, stores.Correct)
			o.Scenarios = []string{"lost-reply", "network"}
			sum, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sum.Scenarios {
				t.Logf("%s/%s: %s, %d ops, faults %v, outcomes %v, %.1fs", name, s.Name, s.Verdict, s.Ops, s.Faults, s.Outcomes, s.Seconds)
				if s.Verdict != check.Pass {
					t.Errorf("%s/%s on the correct store: %s %s %v", name, s.Name, s.Verdict, s.Error, s.Violations)
				}
				if s.Outcomes["unknown"] == 0 {
					t.Errorf("%s/%s: no unknown outcome recorded", name, s.Name)
				}
			}
			lr, nw := sum.Scenarios[0], sum.Scenarios[1]
			// One lost reply per key, each on a warmed connection: a call
			// that committed.
			if lr.Faults[nemesis.NetLostReply] != o.Keys {
				t.Errorf("lost-reply: %d replies lost, want one per key (%d)", lr.Faults[nemesis.NetLostReply], o.Keys)
			}
			for _, k := range nemesis.NetKinds {
				if nw.Faults[k] == 0 {
					t.Errorf("network: no %s fault hit any traffic: %v", k, nw.Faults)
				}
			}
		})
	}
}

// TestNetworkScenariosSkipEmbeddedStores: on sqlite and memory there is no
// network between the store and its data: skipped, saying why.
func TestNetworkScenariosSkipEmbeddedStores(t *testing.T) {
	for _, name := range []string{"memory", "sqlite"} {
		b, err := stores.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		o := harness.DefaultOptions()
		o.Backend, o.Addr, o.Scenarios = b, t.TempDir(), []string{"network", "lost-reply"}
		sum, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sum.Scenarios {
			if s.Skipped == "" || !strings.Contains(s.Skipped, name) || s.Ops != 0 {
				t.Errorf("%s/%s: skipped %q after %d ops; want skipped naming the store, no calls", name, s.Name, s.Skipped, s.Ops)
			}
		}
		if sum.Verdict != check.Skipped {
			t.Errorf("%s: a run of skipped scenarios judged nothing, but its verdict is %s", name, sum.Verdict)
		}
	}
}

// resend is a client-side bug the lost-reply scenario must catch: a store
// call that fails is sent again at once (as a driver with automatic retries
// would), so a Begin whose claim committed comes back "in flight" to the
// very caller that owns it, and a committed save comes back "fenced".
type resend struct{ stores.Store }

func (r resend) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	d, err := r.Store.Begin(ctx, req)
	if err != nil {
		d, err = r.Store.Begin(ctx, req)
	}
	return d, err
}

func (r resend) Complete(ctx context.Context, key stores.KeyRef, tok stores.Token, resp stores.Response) error {
	err := r.Store.Complete(ctx, key, tok, resp)
	if err != nil && !errors.Is(err, stores.ErrFenced) {
		err = r.Store.Complete(ctx, key, tok, resp)
	}
	return err
}

// TestLostReplyCatchesBlindResend: the scenario's checkers catch a client
// that resends a call whose reply was lost.
func TestLostReplyCatchesBlindResend(t *testing.T) {
	b, err := stores.Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	open := b.Open
	b.Open = func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
		st, err := open(ctx, addr, cfg)
		if err != nil {
			return nil, err
		}
		return resend{st}, nil
	}
	o := harness.DefaultOptions()
	o.Backend, o.Addr, o.Net = b, servers.SharedForTest(t, servers.Redis).Addr, servers.Network("redis")
	o.Scenarios = []string{"lost-reply"}
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != check.Fail {
		t.Fatalf("a blind resend after a lost reply survived: %s, outcomes %v", sum.Verdict, sum.Scenarios[0].Outcomes)
	}
	for _, v := range sum.Violations {
		t.Logf("caught: %s on %s: %s", v.Checker, v.Key, v.Detail)
	}
}

// TestNetworkMoreClientsThanKeys: with more client pairs than keys, some
// clients have no key. Their loop spun forever, ignoring the end of the
// fault schedule and the context (a drawn run of 32 clients and 11 keys
// burned a CPU for 17 minutes and ignored Ctrl-C); the scenario must end
// and pass.
func TestNetworkMoreClientsThanKeys(t *testing.T) {
	o := harnesstest.Options(t, "redis", stores.Correct)
	o.Scenarios, o.Keys, o.Clients = []string{"network"}, 2, 10
	done := make(chan *results.Summary, 1)
	go func() {
		sum, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Error(err)
		}
		done <- sum
	}()
	select {
	case sum := <-done:
		if sum != nil && sum.Verdict != check.Pass {
			t.Errorf("network with 10 clients on 2 keys: %s %v", sum.Verdict, sum.Violations)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("network with 10 clients on 2 keys did not end in 3 minutes")
	}
}
