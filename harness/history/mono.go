package history

import (
	"time"

	"golang.org/x/sys/unix"
)

// monotonicNow reads the machine's CLOCK_MONOTONIC, in nanoseconds. It is
// the clock Go's own monotonic readings come from on Linux, and it is one
// clock for every process on the machine (unlike a process's time.Now()
// monotonic reading, whose origin is private), so the harness and its
// worker processes can stamp events on one timeline without trusting the
// wall clock, which NTP may step or slew during a run.
func monotonicNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error()) // cannot fail on Linux
	}
	return ts.Nano()
}

// MonoStart is the history's start on CLOCK_MONOTONIC: what a worker
// process needs to stamp its events in the history's time.
func (h *History) MonoStart() int64 {
	mono, now := clockPair()
	return mono - int64(now.Sub(h.start))
}

// FromMono makes a history whose clock reads the same as the one that
// started at monoStart on CLOCK_MONOTONIC (in another process), and whose
// records go to sink.
func FromMono(monoStart int64, sink Sink) *History {
	mono, now := clockPair()
	return &History{start: now.Add(-time.Duration(mono - monoStart)), sink: sink}
}

// pairTries and pairGap bound clockPair's search.
const (
	pairTries = 64
	pairGap   = 20 * time.Microsecond
)

// clockPair reads CLOCK_MONOTONIC and Go's clock at one moment, as near
// as the process can: a thread preempted between the two readings (a
// loaded machine does it for milliseconds) would shift every event of a
// worker process by that much against the harness and the other workers.
// A soak at load 50 recorded a worker's replay 4 ms before the save it
// replayed, whose Now was earlier, and failed a correct SQLite store. So
// the readings are bracketed by two of Go's, and of up to pairTries tries
// the tightest bracket is kept (the first under pairGap ends the search),
// with Go's clock at its middle.
func clockPair() (mono int64, now time.Time) {
	best := time.Duration(-1)
	for range pairTries {
		a := time.Now()
		m := monotonicNow()
		gap := time.Since(a)
		if best < 0 || gap < best {
			best, mono, now = gap, m, a.Add(gap/2)
		}
		if best < pairGap {
			break
		}
	}
	return mono, now
}
