package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/harness/scenario"
)

// DefaultMaxMemory is the Options.MaxMemory of DefaultOptions: half the
// memory the machine had available when it was first asked (Linux's
// MemAvailable), so that a run too large for the machine stops and
// reports with room left to check what it recorded; 0 (no limit) where
// that is unknown.
var DefaultMaxMemory = sync.OnceValue(func() uint64 { return memAvailable() / 2 })

// memAvailable is /proc/meminfo's MemAvailable in bytes (0: unknown).
func memAvailable() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// MemoryLimitError is the cause of a run stopped at Options.MaxMemory.
type MemoryLimitError struct {
	Held, Limit uint64 // bytes
}

func (e *MemoryLimitError) Error() string {
	return fmt.Sprintf("stopped at the memory limit: the harness held %s, past half the %s allowed (--max-memory), the other half kept for checking what it recorded; the scenarios recorded so far were checked, the rest did not run",
		size(e.Held), size(e.Limit))
}

// size prints a number of bytes in MB below a GB, else in GB (in KB
// below an MB, where MB would say 0).
func size(b uint64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.0f KB", float64(b)/(1<<10))
	}
	if b < 1<<30 {
		return fmt.Sprintf("%.0f MB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2f GB", float64(b)/(1<<30))
}

// memoryEvery is how often guardMemory samples the memory held: a run
// records at most some hundred thousand calls a second, a few hundred MB.
const memoryEvery = 100 * time.Millisecond

// heldBytes is the memory the Go runtime holds from the system (its
// heap, stacks and own structures, less what it gave back): about the
// process's resident memory.
func heldBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// guardMemory returns ctx cancelled, with a *MemoryLimitError as its
// cause, once the memory held passes half of limit (0: never): checking
// a history takes about as much again as recording it did. The func it
// returns stops the watch; it must be called.
func guardMemory(ctx context.Context, limit uint64) (context.Context, func()) {
	if limit == 0 {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := scenario.Every(ctx, memoryEvery, func() {
		if h := heldBytes(); h > limit/2 {
			cancel(&MemoryLimitError{Held: h, Limit: limit})
		}
	})
	return ctx, func() { stop(); cancel(nil) }
}
