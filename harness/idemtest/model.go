// Package idemtest is the conformance suite for idempotency-key stores, in
// the manner of testing/fstest.TestFS: a store's author supplies a Factory,
// and the suite drives fresh stores with random operations and compares every
// answer with the model of package models.
package idemtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"pgregory.net/rapid"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/internal/rapidrec"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// ModelTest runs the model property with rapid (100 checks by default;
// -rapid.checks and -rapid.seed as usual). A failure is shrunk to the
// shortest sequence of operations and printed with the key's history, the
// time that passed and the store's own errors.
//
// Rapid saves each failing case under testdata/rapid/<test name>/ and
// replays the saved cases first on the next run (commit them to keep a
// fixed bug fixed). A saved case that still fails stops rapid before its
// random search, so a standing failure would hide any other bug: when
// one fails, ModelTest names the file and runs a fresh search too, as the
// subtest "fresh-search" (which saves nothing).
func ModelTest(t *testing.T, f Factory) {
	t.Helper()
	saved, _ := filepath.Glob(filepath.Join("testdata", "rapid", safeName(t.Name()), "*.fail"))
	var u unknownCases
	for _, n := range timesFor(f).notes { // what the model test does not judge
		t.Logf("note: %s", n)
	}
	failed, report := rapidrec.Check(t.Name(), modelProperty(f, "", &u))
	if n := u.budget.note(); n != "" {
		t.Logf("note: %s", n)
	}
	if why := u.openFailure(); why != "" {
		t.Error(why + declaredHintLine(f, why))
		return
	}
	if !failed {
		if why := u.invalidNeverRefused(); why != "" {
			t.Error(why)
			return
		}
		if why := u.appliedNothing(); why != "" {
			t.Error(why)
			return
		}
		if why := u.tooMany(); why != "" {
			notJudged(t, why) // said, never a silent pass
		}
		if len(saved) > 0 {
			t.Logf("the %d saved failing case(s) of %s pass now (%s)", len(saved), t.Name(), strings.Join(saved, ", "))
		}
		return
	}
	t.Error(report)
	if len(saved) == 0 {
		return
	}
	t.Logf("saved failing cases were replayed first: %s", strings.Join(saved, ", "))
	t.Run("fresh-search", func(t *testing.T) {
		noFailFiles.Lock()
		defer noFailFiles.Unlock()
		if fl := flag.Lookup("rapid.nofailfile"); fl != nil {
			old := fl.Value.String()
			_ = fl.Value.Set("true")
			defer func() { _ = fl.Value.Set(old) }()
		}
		rapid.Check(t, ModelProperty(f, ""))
	})
}

// noFailFiles serializes the fresh searches, which switch rapid's
// process-wide nofailfile flag on for their run.
var noFailFiles sync.Mutex

// safeName is rapid's directory name for a test (its kindaSafeFilename).
func safeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// ModelProperty is the property ModelTest checks: random Begin, Complete,
// Release, Prune and time jumps on several tenants and keys by clients with
// skewed clocks, each answer checked against the model. The store is of the
// given variant ("" for the factory's default).
func ModelProperty(f Factory, variant string) func(*rapid.T) {
	return modelProperty(f, variant, nil)
}

// modelProperty is ModelProperty counting its cases, and those a call
// of unknown outcome cut short, in u (nil: not counted).
func modelProperty(f Factory, variant string, u *unknownCases) func(*rapid.T) {
	return func(rt *rapid.T) {
		if u != nil {
			if !u.budget.begin() {
				return // past ModelTimeBudget: said once rapid ends
			}
			defer u.budget.end(rt)
			u.mu.Lock()
			u.cases++
			u.mu.Unlock()
		}
		mt := timesFor(f)
		cfg := stores.Config{LockTTL: mt.cfg.LockTTL, Retention: mt.cfg.Retention, Variant: variant,
			Namespace: fmt.Sprintf("m%d", namespaceSeq.Add(1)+uint64(time.Now().UnixNano()))}
		if u != nil && u.unopened() {
			rt.Skip("the store could not be opened before") // said once rapid ends (unknownCases.openFailure)
		}
		s, err := f.Open(cfg)
		if err != nil {
			if u != nil {
				// Not a case of the store's behaviour: rapid must not
				// save it as a failing case to replay (a Redis that was
				// down became a file the README says to commit).
				u.openFailed(err)
				rt.Skip("the store could not be opened")
			}
			rt.Fatalf("open %s: %v", f.Name, err)
		}
		defer s.Close()
		d := newDriver(f.Clock, mt, s)
		d.fence, d.errored, d.leaseDeclared = f.Fence, u, f.LockTTL > 0
		actions := map[string]func(*rapid.T){
			"begin":    d.begin,
			"complete": d.complete,
			"release":  d.release,
			"advance":  d.advance,
			"prune":    d.prune,
			"invalid":  d.invalid,
		}
		if _, ok := s.(stores.Extender); ok {
			actions["extend"] = d.extend
		}
		for name, act := range actions {
			actions[name] = func(rt *rapid.T) {
				if d.cut {
					return // after a call of unknown outcome, nothing more is judged in this case
				}
				act(rt)
			}
		}
		rt.Repeat(actions)
		if u != nil {
			u.mu.Lock()
			u.applied += d.applied
			u.notApplied += d.notApplied
			u.mu.Unlock()
		} else if d.notApplied > 0 && d.applied == 0 {
			// Counted by no ModelTest: a case that judged nothing is
			// no case (rapid then fails a store refusing every call,
			// for want of valid cases), and a short one all refused
			// by a correct store is drawn again.
			rt.Skip("the store answered every call of this case not applied: nothing was judged")
		}
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
	// the store's fence, if it declares one, whether it gave a number as
	// a field of a claim, and each key's last claim and life (checkFence)
	fence       stores.Fence
	fencesGiven bool
	fences      map[stores.KeyRef]*fenceLife
	// calls answered, and calls the store declared not applied
	// (stores.ErrNotApplied)
	applied, notApplied int
	// errored counts, across the property's cases, those cut short by a
	// call that failed without a decision (unknown); cut is set once this
	// case met one: every action after it does nothing.
	errored *unknownCases
	cut     bool
	// leaseDeclared: the factory declared its lease (Factory.LockTTL);
	// saidLease is a lease a claim reported that is not the model's
	// (0: none), for failure messages (leaseNote).
	leaseDeclared bool
	saidLease     time.Duration
	// offset: a server-clock store's clock against this process's
	offset serverOffset
}

var (
	tenants = []string{"acme", "globex"}
	keys    = adversarialKeys()
	// Two requests' parameters as the harness writes them, differing in
	// the amount's value alone: a store that normalises the value away
	// (fingerprint-drops-amount) answers them alike, where "fp-A" and
	// "fp-B" differed in a way no such store misses.
	fingerprints = []string{"amount=1000", "amount=1001"}
)

func newDriver(c stores.ClockSource, mt modelTimes, s stores.Store) *driver {
	ttl := mt.cfg.LockTTL
	return &driver{
		clockSrc: c, times: mt, store: s,
		clock:    faults.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		skews:    []time.Duration{0, ttl / 2, -ttl / 2}, // three clients, two skewed
		possible: map[stores.KeyRef][]models.State{},
		history:  map[stores.KeyRef][]string{},
		fences:   map[stores.KeyRef]*fenceLife{},
		ctx:      context.Background(),
	}
}

func (d *driver) states(k stores.KeyRef) []models.State {
	if s, ok := d.possible[k]; ok {
		return s
	}
	return []models.State{{}}
}

// skipped reports whether the store declared the call not applied
// (stores.ErrNotApplied: it did nothing, as a serialization failure
// does), and notes it in the key's history; any other answer counts as
// applied. A store that applies nothing, over all the cases, fails the
// model test (unknownCases.appliedNothing).
func (d *driver) skipped(rt *rapid.T, in models.Input, err error) bool {
	if !errors.Is(err, stores.ErrNotApplied) {
		d.applied++
		return false
	}
	d.notApplied++
	if in.Key != (stores.KeyRef{}) {
		d.history[in.Key] = append(d.history[in.Key], fmt.Sprintf("%s  %s → not applied (the store said: %v)", d.stamp(in.Now), models.DescribeOperation(in, models.Output{NotApplied: true}), err))
	}
	return true
}

// check steps the model with the call and its answer and fails with the
// key's history when no state allows that answer. err is the store's
// error, shown beside its answer ("fenced: …").
func (d *driver) check(rt *rapid.T, in models.Input, out models.Output, err error) {
	k := in.Key
	line := fmt.Sprintf("%s  %s", d.stamp(in.Now), models.DescribeOperation(in, out))
	if in.Kind == models.Begin {
		// Stamped by the time the model judges it (its decision's, on a
		// server-clock store): its request time there is only a lower
		// bound, and one slow call's bound printed a Begin half a second
		// before the Prune above it.
		line = fmt.Sprintf("%s  client %d: %s", d.stamp(models.OpTime(in, out)), d.lastClient, models.DescribeOperation(in, out))
		if out.Decision.Outcome == stores.Claimed {
			line += d.claimNote(in, out.Decision)
		}
	}
	if err != nil {
		line += fmt.Sprintf("  (the store said: %v)", err)
	}
	d.history[k] = append(d.history[k], line)
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
		hint, allows := "", ""
		for _, s := range d.states(k) {
			was = append(was, models.DescribeState(s))
			// What the model expected, and why (a store author read
			// the model's source to learn it).
			if a := models.Allows(d.times.cfg, s, in, out); a != "" && !strings.Contains(allows, a) {
				allows += "\n  " + a
			}
			if h := models.Hint(d.times.cfg, s, in, out); h != "" {
				hint = "\n  " + h
			}
		}
		hint = allows + hint
		rt.Fatalf("%s: the model forbids the last answer for key %s\n  state before: %s\n  history of the key:\n    %s%s%s%s",
			"linearizability", k, strings.Join(was, " | "), strings.Join(d.history[k], "\n    "), hint, d.leaseNote(in, out), d.mergeNote(in, out))
	}
	d.possible[k] = next
	if l := d.fences[k]; l != nil && d.times.cfg.PastRetention(l.born, models.OpTime(in, out)) {
		l.mayEnd = true // retention may remove the record from here on
	}
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
	var lease time.Duration
	if d.times.cfg.Semantics.PerRequestLease {
		lease = rapid.SampledFrom([]time.Duration{0, d.times.cfg.LockTTL / 2, 2 * d.times.cfg.LockTTL}).Draw(rt, "lease")
	}
	d.nextID++
	before := time.Now()
	in := models.Input{Kind: models.Begin, Key: k, Fingerprint: fp, Now: d.earliest(client), ID: d.nextID, Lease: lease}
	dec, err := d.store.Begin(d.ctx, stores.Request{KeyRef: k, Fingerprint: fp, Now: in.Now, Lease: lease})
	if d.clockSrc == stores.ServerClock && err == nil && !dec.DecidedAt.IsZero() {
		d.offset.observe(before, time.Now(), dec.DecidedAt)
	}
	if d.skipped(rt, in, err) {
		return
	}
	if err != nil {
		d.unknown(rt, fmt.Sprintf("Begin(%s)", k), err)
		return
	}
	if d.clockSrc == stores.CallerClock && !dec.DecidedAt.Equal(in.Now) {
		rt.Fatalf("Begin(%s): a caller-clock store must decide at the request's Now %v, said %v", k, in.Now, dec.DecidedAt)
	}
	out := models.Output{Decision: dec}
	d.check(rt, in, out, nil)
	if dec.Outcome == stores.Claimed {
		d.claims = append(d.claims, claim{k, dec.Token})
		d.checkFence(rt, client, in, out)
	}
}

// claimNote is what a claim's history line adds: its fencing number, if it
// has one, and its lease: until when the model holds it (its decision
// time plus its lease), and, when the store says another end
// (stores.Decision.LeaseUntil), the store's.
func (d *driver) claimNote(in models.Input, dec stores.Decision) string {
	var parts []string
	if n, ok := stores.FenceOf(d.fence, dec); ok {
		parts = append(parts, fmt.Sprintf("fence %d", n))
	}
	lease := d.times.cfg.LockTTL
	if in.Lease > 0 && d.times.cfg.Semantics.PerRequestLease {
		lease = in.Lease
	}
	until := dec.DecidedAt.Add(lease)
	note := fmt.Sprintf("lease until %s (%v)", d.stamp(until), lease)
	if said := dec.LeaseUntil.Sub(dec.DecidedAt); !dec.LeaseUntil.IsZero() && (said-lease > lease/10 || lease-said > lease/10) {
		d.saidLease = said
	}
	if !dec.LeaseUntil.IsZero() && !dec.LeaseUntil.Equal(until) {
		note += fmt.Sprintf(", the store says until %s", d.stamp(dec.LeaseUntil))
	}
	return "  [" + strings.Join(append(parts, note), ", ") + "]"
}

// stamp prints a time of the test's clock for the key's history.
func (d *driver) stamp(t time.Time) string {
	return t.Format("15:04:05.000")
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
// a made-up one, a hostile one (workload.HostileTokens: a pattern that
// matches the token, its prefix, its case).
func (d *driver) pickClaim(rt *rapid.T) (claim, bool) {
	if len(d.claims) == 0 {
		return claim{}, false
	}
	back := rapid.IntRange(0, len(d.claims)-1).Draw(rt, "claims back") // 0 (the latest) is drawn most
	c := d.claims[len(d.claims)-1-back]
	switch rapid.IntRange(0, 6).Draw(rt, "token source") {
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
	case 6:
		hostile := workload.HostileTokens(c.token) // a pattern, a prefix, another case
		c.token = hostile[rapid.IntRange(0, len(hostile)-1).Draw(rt, "hostile token")]
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
	in.Now = d.latest() // after the call: the store decided no later than this
	if d.skipped(rt, in, err) {
		return
	}
	if err != nil && !errors.Is(err, stores.ErrFenced) {
		d.unknown(rt, fmt.Sprintf("Complete(%s)", c.key), err)
		return
	}
	d.check(rt, in, models.Output{Fenced: err != nil}, err)
}

// extend renews a claim's lease, for a store that implements
// stores.Extender.
func (d *driver) extend(rt *rapid.T) {
	c, ok := d.pickClaim(rt)
	if !ok {
		rt.Skip("no claim yet")
	}
	d.nextID++
	in := models.Input{Kind: models.Extend, Key: c.key, Token: c.token, ID: d.nextID, Called: d.earliest(0)}
	err := d.store.(stores.Extender).Extend(d.ctx, c.key, c.token, in.Called)
	in.Now = d.latest()
	if d.skipped(rt, in, err) {
		return
	}
	if err != nil && !errors.Is(err, stores.ErrFenced) {
		d.unknown(rt, fmt.Sprintf("Extend(%s)", c.key), err)
		return
	}
	d.check(rt, in, models.Output{Fenced: err != nil}, err)
}

func (d *driver) release(rt *rapid.T) {
	c, ok := d.pickClaim(rt)
	if !ok {
		rt.Skip("no claim yet")
	}
	d.nextID++
	in := models.Input{Kind: models.Release, Key: c.key, Token: c.token, ID: d.nextID}
	err := d.store.Release(d.ctx, c.key, c.token)
	in.Now = d.latest()
	if d.skipped(rt, in, err) {
		return
	}
	if err != nil && !errors.Is(err, stores.ErrFenced) {
		d.unknown(rt, fmt.Sprintf("Release(%s)", c.key), err)
		return
	}
	d.check(rt, in, models.Output{Fenced: err != nil}, err)
}

// advance moves time on (a manual clock jumps; for a server-clock store
// the test sleeps), and notes it in every key's history, so a failure
// shows the time that passed between two calls.
func (d *driver) advance(rt *rapid.T) {
	by := rapid.SampledFrom(d.times.advances).Draw(rt, "advance")
	if d.clockSrc == stores.ServerClock {
		time.Sleep(by)
	} else {
		d.clock.Advance(by)
	}
	how := "the clock moves"
	if d.clockSrc == stores.ServerClock {
		how = "the test sleeps"
	}
	for k := range d.history {
		d.history[k] = append(d.history[k], fmt.Sprintf("%s  — %s %v —", d.stamp(d.latest()), how, by))
	}
}

// prune asks the store to prune; the model allows any key older than the
// retention to vanish at any moment, and none younger.
func (d *driver) prune(rt *rapid.T) {
	in := models.Input{Kind: models.Prune, Now: d.earliest(0)}
	_, err := d.store.Prune(d.ctx, in.Now)
	if d.skipped(rt, in, err) {
		return
	}
	if err != nil {
		d.unknown(rt, "Prune", err)
		return
	}
	in.Now = d.latest() // a server-clock store pruned by its own clock, no later than this
	for k := range d.possible {
		in.Key = k
		d.check(rt, in, models.Output{}, nil)
	}
}
