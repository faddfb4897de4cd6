package execstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/execstore"
	"github.com/idemcheck/idemcheck/stores/lease"
)

// leaseFields is the lease store giving its fencing number and its
// lease's end as fields of its decisions (stores.Decision.Fence and
// LeaseUntil), as a store whose token is opaque would: Serve sends them as
// fence and lease_until_ms with no Fence func.
type leaseFields struct {
	*lease.Store
	ttl time.Duration
}

func (s leaseFields) Begin(ctx context.Context, r stores.Request) (stores.Decision, error) {
	d, err := s.Store.Begin(ctx, r)
	if err != nil || d.Outcome != stores.Claimed {
		return d, err
	}
	d.Fence, _ = lease.Fence(d.Token)
	l := s.ttl
	if r.Lease > 0 {
		l = r.Lease
	}
	d.LeaseUntil = d.DecidedAt.Add(l)
	return d, nil
}

// serveLeaseFields is the test binary as the leaseFields store.
func serveLeaseFields() {
	err := execstore.Serve(context.Background(), os.Stdin, os.Stdout, leaseHello, nil, func(_ context.Context, cfg stores.Config, _ string) (stores.Store, error) {
		s, err := lease.New(cfg, nil)
		if err != nil {
			return nil, err
		}
		return leaseFields{s, cfg.LockTTL}, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// fenceZero is a store that claims with fence 0, which the protocol
// refuses (numbers start at 1; a Decision's 0 means none).
func fenceZero() {
	fmt.Println(`{"type":"hello","protocol":1,"name":"zero","clock":"caller","fence":true}`)
	in := bufio.NewScanner(os.Stdin)
	for id := 1; in.Scan(); id++ {
		if id == 1 {
			fmt.Println(`{"type":"ok","id":1}`)
			continue
		}
		fmt.Printf(`{"type":"ok","id":%d,"decision":{"outcome":"claimed","token":"t","fence":0}}`+"\n", id)
	}
}

// TestFieldsCrossTheProtocol: a claim's fence and lease end, given as
// fields by the store, reach the Decision as fields beside the store's own
// token (which goes back unchanged in a save); fence 0 is a protocol
// error.
func TestFieldsCrossTheProtocol(t *testing.T) {
	ctx := context.Background()
	c, err := execstore.Probe(ctx, line("lease-fields"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stores.Config{LockTTL: time.Second, Retention: time.Hour}
	st, err := c.Open(ctx, "", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	d, err := st.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "f", Now: time.Now()})
	if err != nil || d.Outcome != stores.Claimed {
		t.Fatalf("begin: %+v, %v", d, err)
	}
	if n, ok := lease.Fence(d.Token); !ok || d.Fence != n || n == 0 {
		t.Fatalf("fence field %d, the token %q says %d (%v)", d.Fence, d.Token, n, ok)
	}
	if got := d.LeaseUntil.Sub(d.DecidedAt); got != cfg.LockTTL {
		t.Fatalf("lease until %v, decided at %v: a lease of %v, want %v", d.LeaseUntil, d.DecidedAt, got, cfg.LockTTL)
	}
	if err := st.Complete(ctx, k, d.Token, stores.Response{Status: 201, Body: "ok"}); err != nil {
		t.Fatalf("the store's own token, given back, was refused: %v", err)
	}

	z, err := execstore.Probe(ctx, line("fence-zero"), nil)
	if err != nil {
		t.Fatal(err)
	}
	zs, err := z.Open(ctx, "", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer zs.Close()
	if _, err := zs.Begin(ctx, stores.Request{KeyRef: k, Fingerprint: "f", Now: time.Now()}); err == nil ||
		!errors.Is(z.Fatal(), execstore.ErrProtocol) || !strings.Contains(z.Fatal().Error(), "fence 0") {
		t.Fatalf("a claim with fence 0: begin said %v, the command's fatal error is %v", err, z.Fatal())
	}
}

// tokenRequired is a store that reads the fields the protocol's table
// lists for a save and a release, as a store in a language without
// optional fields does (Python's msg["token"]): a request without its
// token is answered other; one with any token is fenced, since this
// store holds no claims.
func tokenRequired() {
	serveLines(`{"type":"hello","protocol":1,"name":"strict","clock":"caller"}`, func(m map[string]any, id int64) {
		switch _, has := m["token"]; {
		case m["type"] == "open" || m["type"] == "close":
			fmt.Printf(`{"type":"ok","id":%d}`+"\n", id)
		case !has:
			fmt.Printf(`{"type":"error","id":%d,"code":"other","message":"KeyError: 'token'"}`+"\n", id)
		default:
			fmt.Printf(`{"type":"error","id":%d,"code":"fenced","message":"no such claim"}`+"\n", id)
		}
	})
}

// serveLines is the test binary as a store written by hand, as one in
// another language is: it says hello, then gives answer each request
// line, decoded, with its id.
func serveLines(hello string, answer func(m map[string]any, id int64)) {
	fmt.Println(hello)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var m map[string]any
		if err := json.Unmarshal(in.Bytes(), &m); err != nil {
			os.Exit(1)
		}
		answer(m, int64(m["id"].(float64)))
	}
}

// TestEmptyTokenIsSent: a save and a release with an empty token (the
// abuse scenario's forged ones) carry the token field all the same, so a
// store that reads it finds it and answers fenced. Without it, such a
// store answered other, the calls became unknown outcomes, and abuse
// passed without having judged its fencing of them.
func TestEmptyTokenIsSent(t *testing.T) {
	ctx := context.Background()
	c, err := execstore.Probe(ctx, line("token-required"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Open(ctx, "", stores.Config{LockTTL: time.Second, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	k := stores.KeyRef{Tenant: "t", Key: "k"}
	for _, tok := range []stores.Token{"", "forged"} {
		if err := st.Complete(ctx, k, tok, stores.Response{Status: 201, Body: "x"}); !errors.Is(err, stores.ErrFenced) {
			t.Errorf("complete with token %q: %v, want fenced (the token field must be sent)", tok, err)
		}
		if err := st.Release(ctx, k, tok); !errors.Is(err, stores.ErrFenced) {
			t.Errorf("release with token %q: %v, want fenced (the token field must be sent)", tok, err)
		}
	}
}
