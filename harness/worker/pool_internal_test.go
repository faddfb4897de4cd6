package worker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolTriesAStartAgainForItsPatience: a start that fails (the store
// cannot be opened while the server is away) is tried again until the
// pool's patience runs out: a server away for less than it gets its
// worker, one away for longer fails the start with the last error; 0 is
// the default.
func TestPoolTriesAStartAgainForItsPatience(t *testing.T) {
	if p := NewPool(context.Background(), 0, nil, nil); p.patience != DefaultStartPatience {
		t.Fatalf("patience 0 gave %v, want the default %v", p.patience, DefaultStartPatience)
	}
	for _, c := range []struct {
		name              string
		patience, awayFor time.Duration
		started           bool
	}{
		{"the server back within the patience", 2 * time.Second, 600 * time.Millisecond, true},
		{"the server away past the patience", 500 * time.Millisecond, time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tries atomic.Int64
			begun := time.Now()
			w := &Worker{exited: make(chan struct{})}
			t.Cleanup(func() { close(w.exited) }) // lets the pool's watch end
			p := NewPool(context.Background(), c.patience, func(context.Context) (*Worker, error) {
				tries.Add(1)
				if time.Since(begun) < c.awayFor {
					return nil, errors.New("the server is paused")
				}
				return w, nil
			}, func(error) {})
			got, err := p.Start()
			took := time.Since(begun)
			if c.started {
				if err != nil || got != w {
					t.Fatalf("the start failed after %v (%d tries): %v", took, tries.Load(), err)
				}
				if tries.Load() < 2 {
					t.Fatalf("started at the first try: the server was never away")
				}
				return
			}
			if err == nil {
				t.Fatalf("a worker started though the server was away")
			}
			if took < c.patience {
				t.Fatalf("gave up after %v, before the patience (%v)", took, c.patience)
			}
		})
	}
}
