package idemtest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
)

// fenceLives is the fencing counter of the third-party store the issue
// describes: a number per key that every claim moves on, kept across
// releases, and gone with the key once a prune finds it past its
// retention, so that the key's next claim starts again at 1. Its methods
// do nothing on a nil *fenceLives (a store without fences). The caller
// holds the store's mutex.
type fenceLives struct {
	counters map[stores.KeyRef]*fenceCounter
	// resetOnRelease is a bug: a release forgets the counter, so the
	// next claim starts at 1 inside the same life.
	resetOnRelease bool
}

type fenceCounter struct {
	n       uint64
	created time.Time // the life's first claim: retention counts from here
}

// claim gives the claim d its fencing number and lease end as fields.
func (l *fenceLives) claim(d *stores.Decision, k stores.KeyRef, now time.Time, lease time.Duration) {
	if l == nil {
		return
	}
	c := l.counters[k]
	if c == nil {
		c = &fenceCounter{created: now}
		l.counters[k] = c
	}
	c.n++
	d.Fence, d.LeaseUntil = c.n, now.Add(lease)
}

func (l *fenceLives) released(k stores.KeyRef) {
	if l != nil && l.resetOnRelease {
		delete(l.counters, k)
	}
}

// prune forgets the counters of keys without a record that are past
// their retention.
func (l *fenceLives) prune(rows map[stores.KeyRef]*tinyRow, now time.Time, retention time.Duration) {
	if l == nil {
		return
	}
	for k, c := range l.counters {
		if _, ok := rows[k]; !ok && now.Sub(c.created) >= retention {
			delete(l.counters, k)
		}
	}
}

// lifeFactory is the tiny store with a fence that restarts with each life
// of a key's record, given as decision fields (no Fence func), declared
// (FenceRestartsPerLife) or not. Its variant "reset-on-release" restarts
// the fence on a release too, inside a life.
func lifeFactory(declared bool) idemtest.Factory {
	f := tinyFactory(false)
	f.Name = "tiny-life-fence"
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		lives := &fenceLives{counters: map[stores.KeyRef]*fenceCounter{}, resetOnRelease: cfg.Variant == "reset-on-release"}
		return &tinyStore{cfg: cfg, rows: map[stores.KeyRef]*tinyRow{}, lives: lives}, nil
	}
	f.Semantics.FenceRestartsPerLife = declared
	return f
}

// TestFenceRestartsPerLife: a correct store whose fence restarts once a
// prune removed the key, and which gives the fence and the lease as
// fields of its decisions, passes the suite once it declares
// FenceRestartsPerLife: the model test and every scenario.
func TestFenceRestartsPerLife(t *testing.T) {
	t.Parallel() // its time is the scenarios' waits; a store of its own
	f := lifeFactory(true)
	if f.Fence != nil {
		t.Fatal("the store must give its fences as fields only")
	}
	idemtest.Run(t, f)
}

// TestFenceRestartsPerLifeUndeclared: the same store, undeclared, fails
// the model test and the retention scenario (whose probes claim the keys
// again after a prune), and the failure names the declaration and both
// claims.
func TestFenceRestartsPerLifeUndeclared(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		idemtest.Run(t, lifeFactory(false))
		return
	}
	wantSuiteFails(t, "TestFenceRestartsPerLifeUndeclared", "--- FAIL: TestFenceRestartsPerLifeUndeclared/model",
		"--- FAIL: TestFenceRestartsPerLifeUndeclared/retention", "FenceRestartsPerLife: true",
		", the number of the claim before it: client ", "lease until ")
}

// TestFenceRestartsOnRelease: declaring FenceRestartsPerLife does not let
// a fence restart where no prune can have removed the record: a store
// that forgets its counter on a release fails the model test.
func TestFenceRestartsOnRelease(t *testing.T) {
	msg := idemtest.ExpectFailure(t, lifeFactory(true), "reset-on-release")
	for _, w := range []string{"fencing: client ", "not above ", "less than the retention", "Release("} {
		if !strings.Contains(msg, w) {
			t.Errorf("the failure lacks %q:\n%s", w, msg)
		}
	}
}
