package pool_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/internal/pool"
)

// TestEachRunsEveryIndexOnceWithinWidth: every index runs once, width of
// them do run at once (the first ones wait until width are running), and
// never more.
func TestEachRunsEveryIndexOnceWithinWidth(t *testing.T) {
	const n, width = 50, 3
	var running, most atomic.Int32
	var mu sync.Mutex
	seen := map[int]int{}
	full := make(chan struct{})
	var once sync.Once
	err := pool.Each(n, width, func(i int) error {
		r := running.Add(1)
		for {
			m := most.Load()
			if r <= m || most.CompareAndSwap(m, r) {
				break
			}
		}
		if r == width {
			once.Do(func() { close(full) })
		}
		select {
		case <-full:
		case <-time.After(10 * time.Second): // a pool narrower than width
		}
		mu.Lock()
		seen[i]++
		mu.Unlock()
		running.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if seen[i] != 1 {
			t.Errorf("index %d ran %d times", i, seen[i])
		}
	}
	if m := most.Load(); m != width {
		t.Errorf("at most %d jobs at once, want %d", m, width)
	}
}

// TestEachStopsAtTheFirstError: the first error is returned and no index
// after it starts (one at a time, so "after" is exact).
func TestEachStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var ran []int
	err := pool.Each(10, 1, func(i int) error {
		ran = append(ran, i)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || len(ran) != 4 {
		t.Errorf("error %v after %v, want boom after 0-3", err, ran)
	}
	if err := pool.Each(0, 4, func(int) error { t.Error("called with n = 0"); return nil }); err != nil {
		t.Error(err)
	}
}
