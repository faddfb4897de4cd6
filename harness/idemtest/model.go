// Package idemtest is the conformance suite for idempotency-key stores, in
// the manner of testing/fstest.TestFS: a store's author supplies a Factory,
// and the suite drives fresh stores with random operations and compares every
// answer with the model of package models.
package idemtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Factory makes fresh, empty stores of one implementation.
type Factory struct {
	// Name labels the store in messages.
	Name string
	// Clock says whose clock the store judges staleness by. Caller-clock
	// stores are driven with a manual clock (time jumps cost nothing);
	// server-clock stores with small TTLs and real sleeps.
	Clock stores.ClockSource
	// Open returns a new store with no keys, configured by cfg (a fresh
	// file, schema or key prefix; cfg.Namespace is unique per call). The
	// suite closes it. Open may be called many times by one test: a file
	// store makes each one in a directory of the test's (t.TempDir()).
	Open func(cfg stores.Config) (stores.Store, error)
}

// modelTimes are the contract parameters the model test runs with.
type modelTimes struct {
	cfg      models.Config
	advances []time.Duration
}

func timesFor(c stores.ClockSource) modelTimes {
	if c == stores.ServerClock {
		ttl, ret := 30*time.Millisecond, 120*time.Millisecond
		return modelTimes{
			cfg:      models.Config{LockTTL: ttl, Retention: ret, Slack: 5 * time.Millisecond},
			advances: []time.Duration{time.Millisecond, ttl / 2, ttl + 6*time.Millisecond, ret},
		}
	}
	ttl, ret := 10*time.Second, 60*time.Second
	return modelTimes{
		cfg:      models.Config{LockTTL: ttl, Retention: ret},
		advances: []time.Duration{time.Millisecond, ttl / 2, ttl, ret},
	}
}

// ModelTest runs the model property with rapid (100 checks by default;
// -rapid.checks and -rapid.seed as usual). A failure is shrunk to the
// shortest sequence of operations and printed with the key's history.
func ModelTest(t *testing.T, f Factory) {
	t.Helper()
	rapid.Check(t, ModelProperty(f, ""))
}

// ModelProperty is the property ModelTest checks: random Begin, Complete,
// Release, Prune and time jumps on several tenants and keys by clients with
// skewed clocks, each answer checked against the model. The store is of the
// given variant ("" for the factory's default).
func ModelProperty(f Factory, variant string) func(*rapid.T) {
	return func(rt *rapid.T) {
		mt := timesFor(f.Clock)
		cfg := stores.Config{LockTTL: mt.cfg.LockTTL, Retention: mt.cfg.Retention, Variant: variant,
			Namespace: fmt.Sprintf("m%d", namespaceSeq.Add(1)+uint64(time.Now().UnixNano()))}
		s, err := f.Open(cfg)
		if err != nil {
			rt.Fatalf("open %s: %v", f.Name, err)
		}
		defer s.Close()
		d := newDriver(f.Clock, mt, s)
		rt.Repeat(map[string]func(*rapid.T){
			"begin":    d.begin,
			"complete": d.complete,
			"release":  d.release,
			"advance":  d.advance,
			"prune":    d.prune,
			"invalid":  d.invalid,
		})
	}
}

var namespaceSeq atomic.Uint64

type claim struct {
	key   stores.KeyRef
	token stores.Token
}

type driver struct {
	clockSrc stores.ClockSource
	times    modelTimes
	store    stores.Store
	clock    *faults.ManualClock
	skews    []time.Duration
	possible map[stores.KeyRef][]models.State
	history  map[stores.KeyRef][]string
	claims   []claim
	nextID   int
	// the last Begin's client and key
	lastClient int
	lastKey    stores.KeyRef
	ctx        context.Context
}

var (
	tenants      = []string{"acme", "globex"}
	keys         = adversarialKeys()
	fingerprints = []string{"fp-A", "fp-B"}
)

func newDriver(c stores.ClockSource, mt modelTimes, s stores.Store) *driver {
	ttl := mt.cfg.LockTTL
	return &driver{
		clockSrc: c, times: mt, store: s,
		clock:    faults.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		skews:    []time.Duration{0, ttl / 2, -ttl / 2}, // three clients, two skewed
		possible: map[stores.KeyRef][]models.State{},
		history:  map[stores.KeyRef][]string{},
		ctx:      context.Background(),
	}
}

// now is what the caller's clock reads: the manual clock for caller-clock
// stores, the real one otherwise.
func (d *driver) now(client int) time.Time {
	if d.clockSrc == stores.ServerClock {
		return time.Now()
	}
	return d.clock.Now().Add(d.skews[client])
}

func (d *driver) states(k stores.KeyRef) []models.State {
	if s, ok := d.possible[k]; ok {
		return s
	}
	return []models.State{{}}
}

// check steps the model with the call and its answer and fails with the
// key's history when no state allows that answer.
func (d *driver) check(rt *rapid.T, in models.Input, out models.Output) {
	k := in.Key
	d.history[k] = append(d.history[k], models.DescribeOperation(in, out))
	var next []models.State
	for _, s := range d.states(k) {
		for _, n := range models.Step(d.times.cfg, s, in, out) {
			if !slices.Contains(next, n) {
				next = append(next, n)
			}
		}
	}
	if len(next) == 0 {
		var was []string
		for _, s := range d.states(k) {
			was = append(was, models.DescribeState(s))
		}
		rt.Fatalf("%s: the model forbids the last answer for key %s\n  state before: %s\n  history of the key:\n    %s",
			"linearizability", k, strings.Join(was, " | "), strings.Join(d.history[k], "\n    "))
	}
	d.possible[k] = next
}

func (d *driver) begin(rt *rapid.T) {
	// Half the time the same client returns to the last key: bugs need a
	// few calls on one key, and rapid finds them sooner this way.
	client, k := d.lastClient, d.lastKey
	if d.lastKey.Key == "" || !rapid.Bool().Draw(rt, "same key") {
		client = rapid.IntRange(0, len(d.skews)-1).Draw(rt, "client")
		k = rapid.SampledFrom(keys).Draw(rt, "key")
	}
	d.lastClient, d.lastKey = client, k
	fp := rapid.SampledFrom(fingerprints).Draw(rt, "fingerprint")
	d.nextID++
	in := models.Input{Kind: models.Begin, Key: k, Fingerprint: fp, Now: d.now(client), ID: d.nextID}
	dec, err := d.store.Begin(d.ctx, stores.Request{KeyRef: k, Fingerprint: fp, Now: in.Now})
	if err != nil {
		rt.Fatalf("Begin(%s): unexpected error: %v", k, err)
	}
	if d.clockSrc == stores.CallerClock && !dec.DecidedAt.Equal(in.Now) {
		rt.Fatalf("Begin(%s): a caller-clock store must decide at the request's Now %v, said %v", k, in.Now, dec.DecidedAt)
	}
	if dec.Outcome == stores.Claimed {
		d.claims = append(d.claims, claim{k, dec.Token})
	}
	d.check(rt, in, models.Output{Decision: dec})
}

// adversarialKeys are the keys the model test draws from: one family of
// the harness's adversarial key space (workload.KeyFor: keys that differ
// only in case, whitespace, tenant, Unicode form, a NUL or invalid byte
// after a 250-byte prefix), and the plain key in a second tenant.
func adversarialKeys() []stores.KeyRef {
	var out []stores.KeyRef
	for i := range workload.KeyVariants {
		out = append(out, workload.KeyFor(tenants[0], i, 0))
	}
	return append(out, workload.KeyFor(tenants[1], 0, 0))
}

// pickClaim draws a key and a token to write with: mostly a token handed
// out so far for that key, current or stale (the owner, a stale owner, or
// one writing twice or after its save), and sometimes one a correct store
// must fence whatever the key's state: another key's token, an empty one,
// a made-up one.
func (d *driver) pickClaim(rt *rapid.T) (claim, bool) {
	if len(d.claims) == 0 {
		return claim{}, false
	}
	back := rapid.IntRange(0, len(d.claims)-1).Draw(rt, "claims back") // 0 (the latest) is drawn most
	c := d.claims[len(d.claims)-1-back]
	switch rapid.IntRange(0, 5).Draw(rt, "token source") {
	case 3:
		for i := len(d.claims) - 1; i >= 0; i-- {
			if d.claims[i].key != c.key {
				c.token = d.claims[i].token // another key's
				break
			}
		}
	case 4:
		c.token = ""
	case 5:
		c.token = "made-up-token"
	}
	return c, true
}

func (d *driver) complete(rt *rapid.T) {
	c, ok := d.pickClaim(rt)
	if !ok {
		rt.Skip("no claim yet")
	}
	d.nextID++
	resp := stores.Response{Status: 201, Body: fmt.Sprintf("charge-%d", d.nextID)}
	in := models.Input{Kind: models.Complete, Key: c.key, Token: c.token, Response: resp, ID: d.nextID}
	err := d.store.Complete(d.ctx, c.key, c.token, resp)
	in.Now = d.now(0) // after the call: the store decided no later than this
	if err != nil && !errors.Is(err, stores.ErrFenced) {
		rt.Fatalf("Complete(%s): unexpected error: %v", c.key, err)
	}
	d.check(rt, in, models.Output{Fenced: err != nil})
}

func (d *driver) release(rt *rapid.T) {
	c, ok := d.pickClaim(rt)
	if !ok {
		rt.Skip("no claim yet")
	}
	d.nextID++
	in := models.Input{Kind: models.Release, Key: c.key, Token: c.token, ID: d.nextID}
	err := d.store.Release(d.ctx, c.key, c.token)
	in.Now = d.now(0)
	if err != nil && !errors.Is(err, stores.ErrFenced) {
		rt.Fatalf("Release(%s): unexpected error: %v", c.key, err)
	}
	d.check(rt, in, models.Output{Fenced: err != nil})
}

func (d *driver) advance(rt *rapid.T) {
	by := rapid.SampledFrom(d.times.advances).Draw(rt, "advance")
	if d.clockSrc == stores.ServerClock {
		time.Sleep(by)
		return
	}
	d.clock.Advance(by)
}

// prune asks the store to prune; the model allows any key older than the
// retention to vanish at any moment, and none younger.
func (d *driver) prune(rt *rapid.T) {
	in := models.Input{Kind: models.Prune, Now: d.now(0)}
	if _, err := d.store.Prune(d.ctx, in.Now); err != nil {
		rt.Fatalf("Prune: unexpected error: %v", err)
	}
	in.Now = d.now(0) // a server-clock store pruned by its own clock, no later than this
	for k := range d.possible {
		in.Key = k
		d.check(rt, in, models.Output{})
	}
}

func (d *driver) invalid(rt *rapid.T) {
	key := rapid.SampledFrom([]string{"", strings.Repeat("k", stores.MaxKeyLen+1)}).Draw(rt, "invalid key")
	k := stores.KeyRef{Tenant: tenants[0], Key: key}
	_, err := d.store.Begin(d.ctx, stores.Request{KeyRef: k, Fingerprint: fingerprints[0], Now: d.now(0)})
	if !errors.Is(err, stores.ErrInvalidKey) {
		rt.Fatalf("Begin with a %d-byte key: want the invalid-key error, got %v", len(key), err)
	}
	if err := d.store.Complete(d.ctx, k, "t", stores.Response{}); !errors.Is(err, stores.ErrInvalidKey) {
		rt.Fatalf("Complete with a %d-byte key: want the invalid-key error, got %v", len(key), err)
	}
	if err := d.store.Release(d.ctx, k, "t"); !errors.Is(err, stores.ErrInvalidKey) {
		rt.Fatalf("Release with a %d-byte key: want the invalid-key error, got %v", len(key), err)
	}
}
