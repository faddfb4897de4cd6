package harness_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/stores"
)

// buffer is a journal's file in memory.
type buffer struct{ bytes.Buffer }

func (*buffer) Close() error { return nil }

// journaledRun runs the scenarios on the memory store's variant with a
// journal, and returns the run's summary and its journal.
func journaledRun(t *testing.T, variant string, scenarios ...string) (*results.Summary, []byte) {
	t.Helper()
	o := harnesstest.Options(t, "memory", variant, scenarios...)
	var b buffer
	o.Journal = history.NewJournal(&b)
	sum, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Journal.Close(); err != nil {
		t.Fatal(err)
	}
	return sum, b.Bytes()
}

// recoverBytes recovers a run from journal bytes, as `recheck` does from
// the file a killed run left.
func recoverBytes(t testing.TB, b []byte) (*results.Summary, error) {
	path := filepath.Join(t.TempDir(), harness.JournalFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return harness.Recover(context.Background(), path)
}

// TestRecoverNeverFailsACorrectStore: a correct store's journal cut at
// any byte, as a process killed at any moment leaves it (a torn last
// line, calls in flight, work never ended, faults in progress unseen), is
// recovered without a violation; whole, it gives back the run's own
// verdicts, undecided overall.
func TestRecoverNeverFailsACorrectStore(t *testing.T) {
	sum, b := journaledRun(t, stores.Correct, "race", "takeover", "crash", "retention", "sched-takeover", "skew", "heartbeat")
	if sum.Verdict != check.Pass {
		t.Fatalf("the correct store's run: %s", sum.Verdict)
	}
	whole, err := recoverBytes(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Verdict != check.Unknown || len(whole.Scenarios) != len(sum.Scenarios) || whole.Stopped != harness.Crashed {
		t.Fatalf("the whole journal: verdict %s, %d of %d scenarios, stopped %q", whole.Verdict, len(whole.Scenarios), len(sum.Scenarios), whole.Stopped)
	}
	for i, s := range whole.Scenarios {
		if s.Verdict != sum.Scenarios[i].Verdict || s.Ops != sum.Scenarios[i].Ops {
			t.Errorf("%s: recovered %s with %d calls, ran %s with %d", s.ID(), s.Verdict, s.Ops, sum.Scenarios[i].Verdict, sum.Scenarios[i].Ops)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		cut := rapid.IntRange(0, len(b)).Draw(rt, "cut")
		got, err := recoverBytes(t, b[:cut])
		if err != nil {
			if bytes.IndexByte(b[:cut], '\n') < 0 {
				return // cut inside the run's own first line: nothing to recover
			}
			rt.Fatalf("cut at %d of %d: %v", cut, len(b), err)
		}
		if got.Verdict == check.Fail || got.Verdict == check.Pass {
			rt.Fatalf("cut at %d of %d: recovered verdict %s, violations %v", cut, len(b), got.Verdict, got.Violations)
		}
		for _, s := range got.Scenarios {
			if s.Verdict == check.Fail {
				rt.Fatalf("cut at %d of %d: %s failed: %v", cut, len(b), s.ID(), s.Violations)
			}
		}
	})
}

// TestRecoverKeepsAViolation: a mutant's violation recorded before the
// process died is reported from the journal, and a re-check of the
// recovered run finds it again.
func TestRecoverKeepsAViolation(t *testing.T) {
	sum, b := journaledRun(t, "select-then-insert", "sched-race")
	if sum.Verdict != check.Fail {
		t.Fatalf("the mutant's run: %s", sum.Verdict)
	}
	// Cut inside the scenario: its result line (the last) never written.
	last := bytes.LastIndexByte(b[:len(b)-1], '\n')
	got, err := recoverBytes(t, b[:last+1])
	if err != nil {
		t.Fatal(err)
	}
	if got.Verdict != check.Fail || len(got.Scenarios) != 1 || got.Scenarios[0].Cut == nil {
		t.Fatalf("recovered verdict %s (%d scenarios), want the mutant's failure judged from its journal", got.Verdict, len(got.Scenarios))
	}
	if again := harness.Recheck(context.Background(), got); again.Verdict != check.Fail {
		t.Errorf("re-check of the recovered run: %s", again.Verdict)
	}
}

// TestUnwrittenWholeJournal: the whole journal of a run that finished but
// could not write its files (harness.Unwritten) is the run: its verdict
// as it ended, not interrupted, the reason kept; cut anywhere, it stays
// cut short, undecided, never a pass.
func TestUnwrittenWholeJournal(t *testing.T) {
	sum, b := journaledRun(t, stores.Correct, "race", "mismatch")
	if sum.Verdict != check.Pass {
		t.Fatalf("the correct store's run: %s", sum.Verdict)
	}
	whole, err := recoverBytes(t, b)
	if err != nil {
		t.Fatal(err)
	}
	harness.Unwritten(whole, "disk full", false)
	if whole.Verdict != check.Pass || whole.Interrupted || whole.Stopped != "disk full" {
		t.Errorf("whole: verdict %s, interrupted %v, stopped %q; want the run's pass", whole.Verdict, whole.Interrupted, whole.Stopped)
	}
	last := bytes.LastIndexByte(b[:len(b)-1], '\n')
	cut, err := recoverBytes(t, b[:last+1])
	if err != nil {
		t.Fatal(err)
	}
	harness.Unwritten(cut, "disk full", false)
	if cut.Verdict != check.Unknown || !cut.Interrupted {
		t.Errorf("cut: verdict %s, interrupted %v; want undecided, cut short", cut.Verdict, cut.Interrupted)
	}
	mut, mb := journaledRun(t, "select-then-insert", "sched-race")
	if mut.Verdict != check.Fail {
		t.Fatalf("the mutant's run: %s", mut.Verdict)
	}
	got, err := recoverBytes(t, mb)
	if err != nil {
		t.Fatal(err)
	}
	harness.Unwritten(got, "disk full", false)
	if got.Verdict != check.Fail {
		t.Errorf("the mutant's whole journal: %s, want its failure", got.Verdict)
	}
}

// TestRecoverEndsAtItsLastRecord: a recovered run ends when its journal
// last recorded, whatever the journal file's time says (a run copied
// without its times, cp -r, said 558 s of a run of 18).
func TestRecoverEndsAtItsLastRecord(t *testing.T) {
	sum, b := journaledRun(t, stores.Correct, "race", "takeover")
	path := filepath.Join(t.TempDir(), harness.JournalFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(24 * time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	got, err := harness.Recover(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seconds <= 0 || got.Seconds > sum.Seconds+1 || got.Ended.After(time.Now()) {
		t.Fatalf("recovered: %.1fs, ended %v; the run took %.1fs", got.Seconds, got.Ended, sum.Seconds)
	}
}
