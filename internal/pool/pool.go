// Package pool runs independent jobs a few at a time: the runner's
// scenarios and the mutant matrix's hunts, each on its own store.
package pool

import "sync"

// Each calls f(i) for every i in [0, n), up to width at once (at least
// one), handing out the indices in order, and returns the first error f
// returned; after an error no new index starts, and Each waits for those
// running. Results belong in slots indexed by i, so they come out in order
// whatever order the jobs finish in.
func Each(n, width int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		next  int
		wg    sync.WaitGroup
	)
	for range min(max(width, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next == n {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}
