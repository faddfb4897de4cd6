package main

import (
	"encoding/json"
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
