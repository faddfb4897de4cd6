package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestShardsPartition: for several n and job sizes the shards are
// pairwise disjoint and together are the whole job, and interleave puts
// their items back in the job's order.
func TestShardsPartition(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for size := 0; size <= 23; size++ {
			owner := make([]int, size)
			parts := make([][]int, n)
			for i := 1; i <= n; i++ {
				var s shardFlag
				if err := s.Set(fmt.Sprintf("%d/%d", i, n)); err != nil {
					t.Fatal(err)
				}
				for p := 0; p < size; p++ {
					if s.owns(p) {
						if owner[p] != 0 {
							t.Fatalf("n=%d: item %d in shards %d and %d", n, p, owner[p], i)
						}
						owner[p] = i
						parts[i-1] = append(parts[i-1], p)
					}
				}
			}
			for p, o := range owner {
				if o == 0 {
					t.Fatalf("n=%d size=%d: item %d in no shard", n, size, p)
				}
			}
			whole := interleave(parts)
			for p, x := range whole {
				if x != p {
					t.Fatalf("n=%d size=%d: interleave gives %v", n, size, whole)
				}
			}
			if len(whole) != size {
				t.Fatalf("n=%d size=%d: interleave gives %d items", n, size, len(whole))
			}
		}
	}
	for _, bad := range []string{"0/3", "4/3", "1/0", "x/2", "2", "1/2/3"} {
		var s shardFlag
		if s.Set(bad) == nil {
			t.Errorf("--shard %s accepted", bad)
		}
	}
}

// TestSoakShardsMerge runs a small soak whole and in three shards on the
// memory store, each shard writing to a directory of its own: the merge
// gives the whole run's counts and exit code, and a missing or repeated
// shard is an error (exit 2, one line).
func TestSoakShardsMerge(t *testing.T) {
	dir := t.TempDir()
	args := []string{"soak", "--store", "memory", "--seeds", "2", "--scenario", "race,mismatch", "--hogs", "0", "--json", "--out", t.TempDir()}
	runTo := func(file string, extra ...string) int {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(slices.Clone(args), extra...), &out, &errb)
		if err := os.WriteFile(filepath.Join(dir, file), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return code
	}
	if code := runTo("whole"); code != exitPass {
		t.Fatalf("whole soak: exit %d", code)
	}
	for i := 1; i <= 3; i++ {
		// Each shard writes where its runner likes (--out of its own): a
		// flag of placement, not of the work, which merge refused.
		if code := runTo(fmt.Sprintf("s%d.json", i), "--shard", fmt.Sprintf("%d/3", i), "--out="+t.TempDir()); code != exitPass {
			t.Fatalf("shard %d: exit %d", i, code)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"merge", "--json", dir}, &out, &errb); code != exitPass {
		t.Fatalf("merge: exit %d: %s", code, errb.String())
	}
	var merged, whole soakReport
	raw, _ := os.ReadFile(filepath.Join(dir, "whole"))
	if err := json.Unmarshal(raw, &whole); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), &merged); err != nil {
		t.Fatal(err)
	}
	if len(merged.Rows) != len(whole.Rows) {
		t.Fatalf("merged rows %+v, whole %+v", merged.Rows, whole.Rows)
	}
	for i, r := range whole.Rows {
		m := merged.Rows[i]
		if m.Scenario != r.Scenario || m.Pass != r.Pass || m.Fail != r.Fail || m.Unknown != r.Unknown || m.Skipped != r.Skipped {
			t.Errorf("row %d: merged %+v, whole %+v", i, m, r)
		}
	}
	for name, files := range map[string][]string{
		"missing":   {"s1.json", "s3.json"},
		"repeated":  {"s1.json", "s2.json", "s2.json", "s3.json"},
		"unsharded": {"whole", "s1.json", "s2.json", "s3.json"},
	} {
		var paths []string
		for _, f := range files {
			paths = append(paths, filepath.Join(dir, f))
		}
		errb.Reset()
		if code := run(context.Background(), append([]string{"merge"}, paths...), &out, &errb); code != exitUsage || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%s shard: exit %d, stderr %q", name, code, errb.String())
		}
	}
}

// TestMergeOfNothingJudged: the shards of a soak whose every scenario run
// was skipped on the store merge to the unsharded soak's exit code, 3
// (nothing was judged), never a pass.
func TestMergeOfNothingJudged(t *testing.T) {
	dir, runs := t.TempDir(), t.TempDir()
	for i := 1; i <= 2; i++ {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"soak", "--store", "memory", "--seeds", "2", "--scenario", "workers", "--hogs", "0",
			"--json", "--out", runs, "--shard", fmt.Sprintf("%d/2", i)}, &out, &errb)
		if code != exitUnknown {
			t.Fatalf("shard %d: exit %d, want %d (nothing judged): %s", i, code, exitUnknown, errb.String())
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("s%d.json", i)), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"merge", dir}, &out, &errb); code != exitUnknown || !strings.Contains(out.String(), "nothing was judged") {
		t.Fatalf("merge: exit %d, want %d:\n%s%s", code, exitUnknown, out.String(), errb.String())
	}
}

// TestKilledShardMerges: a soak shard killed before it printed its
// report (a CI job's time limit), recovered by `recheck --json` from its
// journal, merges with the others: the run is undecided (exit 3), not
// "not a shard's report" (exit 2), since the recovered report carries
// its shard as its command line had it. An empty report, what the killed
// shard printed, is refused with the way to recover it.
func TestKilledShardMerges(t *testing.T) {
	t.Parallel()
	args := []string{"soak", "--store", "memory", "--scenario", "race,mismatch", "--seeds", "1-40", "--hogs", "0"}
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, append(slices.Clone(args), "--shard", "1/2", "--json", "--out", t.TempDir())...)
	if code != exitPass {
		t.Fatalf("shard 1/2: exit %d\n%s", code, stderr)
	}
	os.WriteFile(filepath.Join(dir, "s1.json"), []byte(stdout), 0o644)
	ended := func(j string) bool { return lines(j, `"type":"seed"`) >= 3 }
	killed, _ := killedRun(t, "soak", ended, append(slices.Clone(args), "--shard", "2/2")...)
	os.WriteFile(filepath.Join(dir, "s2.json"), nil, 0o644) // what it printed: nothing
	if code, _, stderr := runCLI(t, "merge", filepath.Join(dir, "s1.json"), filepath.Join(dir, "s2.json")); code != exitUsage || !strings.Contains(stderr, "idemcheck recheck --json") {
		t.Errorf("merge with the killed shard's empty report: exit %d, stderr %q; want 2 and the way to recover it", code, stderr)
	}
	code, stdout, stderr = runCLI(t, "recheck", "--json", killed)
	if code != exitUnknown {
		t.Fatalf("recheck of the killed shard: exit %d\n%s", code, stderr)
	}
	os.WriteFile(filepath.Join(dir, "s2.json"), []byte(stdout), 0o644)
	code, stdout, stderr = runCLI(t, "merge", filepath.Join(dir, "s1.json"), filepath.Join(dir, "s2.json"))
	if code != exitUnknown || strings.Contains(stdout, "PASS") || !strings.Contains(stdout, "UNKNOWN") || !strings.Contains(stdout, "never ran: seed") {
		t.Fatalf("merge with the recovered shard: exit %d, want %d, UNKNOWN and its seeds that never ran\n%s%s", code, exitUnknown, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "merge", "--json", filepath.Join(dir, "s1.json"), filepath.Join(dir, "s2.json"))
	var merged soakReport
	if err := json.Unmarshal([]byte(stdout), &merged); err != nil || code != exitUnknown || merged.Verdict != "unknown" || len(merged.Unfinished) == 0 || !merged.Interrupted {
		t.Fatalf("merge --json with the recovered shard: exit %d, verdict %q, %d unfinished, interrupted %v (%v)", code, merged.Verdict, len(merged.Unfinished), merged.Interrupted, err)
	}
}
