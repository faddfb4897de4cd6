package harness

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
)

// A run whose heap passes MaxMemory stops as an interrupt stops it, and
// reports: what finished is checked, the rest is listed as not run, the
// summary names the limit, and the verdict is never a pass. With the
// limit out of reach the same run passes and says nothing of it.
func TestMemoryLimitStopsAndReports(t *testing.T) {
	b, err := stores.Lookup("memory")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Backend, o.Scenarios, o.Keys, o.Clients = b, []string{"race", "mismatch"}, 1000, 16
	runtime.GC()
	o.MaxMemory = 2 * (heldBytes() + 4<<20) // race on 1,000 keys by 16 clients records some tens of MB
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped after %.1fs: %s", sum.Seconds, sum.Stopped)
	if !sum.Interrupted || !strings.Contains(sum.Stopped, "memory limit") || sum.Verdict == check.Pass {
		t.Fatalf("past the limit: interrupted %v, stopped %q, verdict %s; want interrupted, the limit named, not a pass", sum.Interrupted, sum.Stopped, sum.Verdict)
	}
	if len(sum.Scenarios)+len(sum.NotRun) != 2 {
		t.Fatalf("past the limit: ran %d, not run %v; want every scenario accounted for", len(sum.Scenarios), sum.NotRun)
	}

	o.Keys, o.Clients, o.MaxMemory = 8, 6, 1<<40
	if sum, err = Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if sum.Interrupted || sum.Stopped != "" || sum.Verdict != check.Pass {
		t.Fatalf("within the limit: interrupted %v, stopped %q, verdict %s; want a plain pass", sum.Interrupted, sum.Stopped, sum.Verdict)
	}
}
