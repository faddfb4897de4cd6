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

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

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

// NewManualClock starts a manual clock at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

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
