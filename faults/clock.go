package faults

import (
	"sync"
	"time"
)

// Clock is the time source a caller-clock store and the harness read. It is
// injected so tests can skew a client's clock or jump time past LockTTL.
type Clock interface {
	Now() time.Time
}

// RealClock reads the machine's clock.
type RealClock struct{}

// Now returns time.Now() as a wall reading only (see [Wall]).
func (RealClock) Now() time.Time { return Wall(time.Now()) }

// Wall is t without Go's monotonic clock reading: the wall clock alone,
// which is what a store keeps and compares (a timestamp in a row, Unix
// nanoseconds) and what a saved history holds (JSON keeps no monotonic
// reading). Of two times that both carry a monotonic reading, Go's Sub,
// Before and After measure that clock instead, and time.Now reads the two
// clocks apart: on a loaded 2-core machine their offset varied by up to
// 17.6 ms from one reading to the next. A run judged in memory then
// measured other intervals than its store did, and than a re-check of
// its saved history would: a takeover the store made once LockTTL had
// passed could look early, and a correct store fail. Every time a store
// is given and a history records is a wall reading.
func Wall(t time.Time) time.Time { return t.Round(0) }

// SkewedClock is another clock offset by a fixed skew: a client whose clock
// runs ahead (positive) or behind (negative) the others.
type SkewedClock struct {
	Base Clock
	Skew time.Duration
}

// Now returns the base clock's reading plus the skew.
func (c SkewedClock) Now() time.Time { return c.Base.Now().Add(c.Skew) }

// ManualClock only moves when told to: property tests use it to jump past
// LockTTL or retention without sleeping. It is safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock starts a manual clock at t, a wall reading (see [Wall]).
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: Wall(t)} }

// Now returns the clock's current reading.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
