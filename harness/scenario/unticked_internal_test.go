package scenario

import (
	"testing"
	"time"
)

// TestUntickedClock: the longest stretch is measured between ticks, not
// across them (a tick's own wait is no stretch), and the last one ends at
// end; a nil clock (a store with the harness's clock) only waits.
func TestUntickedClock(t *testing.T) {
	long, tick := 60*time.Millisecond, 80*time.Millisecond
	u := &untickedClock{from: time.Now()}
	before := time.Now()
	u.tick(tick)
	if u.from.Sub(before) < tick {
		t.Errorf("the stretch after a tick starts %v after the tick began, within its %v wait", u.from.Sub(before), tick)
	}
	time.Sleep(long)
	u.tick(tick)
	if got := u.end(); got < long {
		t.Errorf("longest stretch %v, want at least the %v slept between two ticks", got, long)
	}
	var none *untickedClock
	start := time.Now()
	none.tick(time.Millisecond)
	if none.end() != 0 || time.Since(start) < time.Millisecond {
		t.Error("a nil clock measured a stretch, or did not wait")
	}
}
