package idemtest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
)

// crashingStore is the tiny store, but a Begin made once it has lived
// past a moment brings the process down (a panic in a client's
// goroutine, which nothing recovers).
type crashingStore struct {
	stores.Store
	after time.Time
}

func (c crashingStore) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if time.Now().After(c.after) {
		panic("crashingStore: the store fell over")
	}
	return c.Store.Begin(ctx, req)
}

// TestACrashLeavesTheRun: a store that brings the test binary down in the
// middle of a scenario leaves the run's journal in its results directory,
// and the run is recovered from it (as `idemcheck recheck <dir>` does):
// the calls recorded before the crash, undecided, no violation.
func TestACrashLeavesTheRun(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		f := tinyFactory(false)
		open := f.Open
		f.Open = func(cfg stores.Config) (stores.Store, error) {
			st, err := open(cfg)
			return crashingStore{st, time.Now().Add(300 * time.Millisecond)}, err
		}
		idemtest.CheckScenario(context.Background(), f, "takeover")
		return
	}
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestACrashLeavesTheRun$", "-rapid.nofailfile")
	cmd.Env = append(os.Environ(), childEnv+"=1", "IDEM_RESULTS="+root)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the store's panic did not bring the process down:\n%s", out)
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "2*"))
	if len(dirs) != 1 {
		t.Fatalf("results directories %v, want one", dirs)
	}
	sum, err := harness.Recover(context.Background(), filepath.Join(dirs[0], harness.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Scenarios) != 1 || sum.Scenarios[0].Ops == 0 {
		t.Fatalf("recovered %d scenarios: want takeover, with the calls made before the crash", len(sum.Scenarios))
	}
	if s := sum.Scenarios[0]; s.Verdict != check.Unknown || sum.Verdict != check.Unknown {
		t.Errorf("recovered %s with %d calls: %s (run %s), want undecided; violations %v", s.ID(), s.Ops, s.Verdict, sum.Verdict, s.Violations)
	}
}
