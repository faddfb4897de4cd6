package idemtest

import (
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// serverOffset bounds how far a server-clock store's clock reads from
// this process's: each claim's decision time (stores.Decision.DecidedAt,
// read on the store's clock during its call) against this process's
// clock before and after the call. The model judges by the store's clock
// (a Begin by its decision time), so the times this process gives the
// model of its other calls (a Prune's, a save's, an Extend's) are read on
// its own clock and moved onto the store's by these bounds: a Postgres
// 20 ms ahead of the test host pruned a record 124 ms old by its own
// clock, which the model, reading the host's, took for 104 ms and younger
// than the 120 ms retention, and a correct store failed.
type serverOffset struct {
	known  bool
	lo, hi time.Duration // the store's clock minus this process's, at least and at most
}

// observe narrows the bounds by a decision read at decided on the
// store's clock during a call made between before and after on this
// process's. Readings the bounds cannot hold together (the store's clock
// stepped) start them again from this one.
func (o *serverOffset) observe(before, after, decided time.Time) {
	lo, hi := decided.Sub(after), decided.Sub(before)
	if o.known && max(lo, o.lo) <= min(hi, o.hi) {
		lo, hi = max(lo, o.lo), min(hi, o.hi)
	}
	o.known, o.lo, o.hi = true, lo, hi
}

// earliest is the earliest the store's clock may read now, by this
// process's clock: a Begin's request time and an Extend's call, the
// lower bounds of when the store decided them.
func (d *driver) earliest(client int) time.Time {
	if d.clockSrc != stores.ServerClock {
		return d.clock.Now().Add(d.skews[client])
	}
	return time.Now().Add(d.offset.lo)
}

// latest is the latest the store's clock may read now: taken after a
// call, the store decided it no later than this.
func (d *driver) latest() time.Time {
	if d.clockSrc != stores.ServerClock {
		return d.clock.Now().Add(d.skews[0])
	}
	return time.Now().Add(d.offset.hi)
}
