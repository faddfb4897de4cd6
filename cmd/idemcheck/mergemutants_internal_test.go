package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/hunt"
)

// TestMergeMutantsKeepsEveryShardsUnfinished: a mutants shard cut short
// (its jobs that did not finish listed) merged after a whole one keeps
// those jobs, and the merge is undecided: the merge kept the first
// shard's list alone, and a second shard's cut jobs were dropped.
func TestMergeMutantsKeepsEveryShardsUnfinished(t *testing.T) {
	shard := func(i int, unfinished []hunt.Unfinished) shardFile {
		rep := &hunt.MutantsReport{Store: "memory", Seed: 1, Seeds: 1, Correct: hunt.CorrectReport{Verdict: check.Pass}, Unfinished: unfinished}
		info := shardInfo{Command: "mutants", Index: i, Of: 2, Args: []string{"--store", "memory"}}
		raw, err := json.Marshal(mutantsJSON{MutantsReport: rep, Verdict: rep.Verdict(), Shard: &info})
		if err != nil {
			t.Fatal(err)
		}
		return shardFile{path: "s.json", info: info, raw: raw}
	}
	cut := []hunt.Unfinished{{Job: hunt.Job{Mutant: "select-then-insert", Scenario: "sched-race", Seed: 1}, Started: true}}
	out, err := mergeMutants([]shardFile{shard(1, nil), shard(2, cut)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Unfinished) != 1 || mutantsCode(out) != exitUnknown {
		t.Fatalf("merged: %d unfinished, exit %d; want the second shard's job and exit 3", len(out.Unfinished), mutantsCode(out))
	}
}

// TestMergeMutantsKeepsWholeShardsPastACutOne: shards 1 and 3 finished,
// shard 2 was cut short after one mutant, before its correct-store runs:
// the merge keeps every row the whole shards finished and says the
// correct store was judged in part (undecided), not that it never ran.
// The merge stopped at the cut shard's last row (13 of 22 kills shown)
// and printed the correct store NOT RUN beside two shards that passed it.
func TestMergeMutantsKeepsWholeShardsPastACutOne(t *testing.T) {
	shard := func(i int, mutants []string, correct check.Verdict, runs []hunt.CorrectRun) shardFile {
		rep := &hunt.MutantsReport{Store: "memory", Seed: 1, Seeds: 1, Correct: hunt.CorrectReport{Verdict: correct, Runs: runs}}
		for _, m := range mutants {
			rep.Mutants = append(rep.Mutants, hunt.MutantReport{Name: m, Killed: true, Kills: 1})
		}
		if correct == "" {
			rep.Unfinished = []hunt.Unfinished{{Job: hunt.Job{Scenario: "race", Seed: 1}}}
		}
		info := shardInfo{Command: "mutants", Index: i, Of: 3, Args: []string{"--store", "memory"}}
		raw, err := json.Marshal(mutantsJSON{MutantsReport: rep, Verdict: rep.Verdict(), Shard: &info})
		if err != nil {
			t.Fatal(err)
		}
		return shardFile{path: "s.json", info: info, raw: raw}
	}
	passed := []hunt.CorrectRun{{Scenario: "race", Seed: 1, Verdict: check.Pass}}
	out, err := mergeMutants([]shardFile{
		shard(1, []string{"a1", "a2", "a3"}, check.Pass, passed),
		shard(2, []string{"b1"}, "", nil),
		shard(3, []string{"c1", "c2", "c3"}, check.Pass, passed),
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range out.Mutants {
		names = append(names, m.Name)
	}
	if want := []string{"a1", "b1", "c1", "a2", "c2", "a3", "c3"}; !slices.Equal(names, want) {
		t.Errorf("merged rows %v, want %v", names, want)
	}
	if out.Correct.Verdict != check.Unknown || mutantsCode(out) != exitUnknown {
		t.Errorf("correct store %q, exit %d; want unknown and exit 3", out.Correct.Verdict, mutantsCode(out))
	}
}
