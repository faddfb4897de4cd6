package history

import "time"

// StallTick is how often WatchStalls wakes up; StallMin is the shortest
// gap between two wake-ups it records as a stall. A 2-core machine under
// load delays a timer by a few milliseconds; a stall of StallMin or more
// means the process was not running at all.
const (
	StallTick = 5 * time.Millisecond
	StallMin  = 40 * time.Millisecond
)

// WatchStalls records, until stopped, every stretch in which the process
// did not run for StallMin or more (its timer fired that late) as a
// FaultStall of client -1: a pause of every client in the process, which
// the harness did not plan but must not blame on the store.
func WatchStalls(h *History) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(StallTick)
		defer t.Stop()
		last := h.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				now := h.Now()
				if gap := time.Duration(now - last); gap >= StallMin {
					h.AddFault(Fault{Client: -1, Kind: FaultStall, Failpoint: "harness", Start: last + int64(StallTick), End: now})
				}
				last = now
			}
		}
	}()
	return func() { close(done); <-finished }
}
