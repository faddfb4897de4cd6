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
	now := h.Now()
	return monotonicNow() - now
}

// FromMono makes a history whose clock reads the same as the one that
// started at monoStart on CLOCK_MONOTONIC (in another process), and whose
// records go to sink.
func FromMono(monoStart int64, sink Sink) *History {
	offset := time.Duration(monotonicNow() - monoStart)
	return &History{start: time.Now().Add(-offset), sink: sink}
}
