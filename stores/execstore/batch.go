package execstore

import (
	"io"
	"sync"
)

// batchWriter writes lines from many goroutines with as few writes as it
// can: the first writer writes, and whatever others add meanwhile goes out
// in its next write (a group commit). With many requests in flight, one
// write carries many lines, and the other side wakes once for them.
type batchWriter struct {
	w       io.Writer
	mu      sync.Mutex
	buf     []byte
	spare   []byte
	writing bool
	err     error
}

// write queues line (which must end in '\n') and returns once it is
// written, by this goroutine or another.
func (b *batchWriter) write(line []byte) error {
	b.mu.Lock()
	if b.err != nil {
		defer b.mu.Unlock()
		return b.err
	}
	b.buf = append(b.buf, line...)
	if b.writing {
		b.mu.Unlock()
		return nil // the writer at work takes it in its next write
	}
	b.writing = true
	for len(b.buf) > 0 && b.err == nil {
		out := b.buf
		b.buf = b.spare[:0]
		b.mu.Unlock()
		_, err := b.w.Write(out)
		b.mu.Lock()
		b.spare = out
		if err != nil {
			b.err = err
		}
	}
	b.writing = false
	err := b.err
	b.mu.Unlock()
	return err
}
