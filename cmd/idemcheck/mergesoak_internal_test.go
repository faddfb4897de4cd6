package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
)

// TestMergeSoakRefusesShardsAtOddsWithThemselves: a soak of 2 seeds × 2
// scenarios in two shards, one failing. Merged whole it fails; with one
// bit of the failing shard's count flipped ("fail": 2 read 0) the merge
// printed PASS beside that shard's own "fail" and its list of runs that
// did not pass, and with a shard's rows cut out it passed on the other
// scenario alone. Both are refused now, naming what disagrees.
func TestMergeSoakRefusesShardsAtOddsWithThemselves(t *testing.T) {
	shard := func(i int, rows []soakRow, bad []string, verdict check.Verdict) shardFile {
		info := shardInfo{Command: "soak", Index: i, Of: 2, Args: []string{"--store", "sqlite"}}
		rep := soakReport{Store: "sqlite", Seeds: 2, Plan: []string{"race", "takeover"}, Rows: rows, Bad: bad, Verdict: verdict, Ran: 2, Shard: &info}
		raw, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return shardFile{path: "shard-" + string(rune('0'+i)) + ".json", info: info, raw: raw}
	}
	failing := shard(1, []soakRow{{Scenario: "race", Fail: 2}}, []string{"results/a", "results/b"}, check.Fail)
	passing := shard(2, []soakRow{{Scenario: "takeover", Pass: 2}}, nil, check.Pass)
	out, err := mergeSoak([]shardFile{failing, passing})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := soakCode(out); code != exitFail {
		t.Fatalf("the whole merge: exit %d, want 1", code)
	}
	flipped := shard(1, []soakRow{{Scenario: "race", Fail: 0}}, []string{"results/a", "results/b"}, check.Fail)
	if _, err := mergeSoak([]shardFile{flipped, passing}); err == nil || !strings.Contains(err.Error(), "shard-1.json") || !strings.Contains(err.Error(), "edited or damaged") {
		t.Fatalf("a shard whose counts contradict its verdict: %v, want it refused by name", err)
	}
	cut := shard(1, nil, nil, check.Unknown)
	if _, err := mergeSoak([]shardFile{cut, passing}); err == nil || !strings.Contains(err.Error(), "0 runs of scenario race where the plan has 2 seeds") {
		t.Fatalf("a shard without its rows: %v, want the plan's runs missing said", err)
	}
}

// TestMergeSoakNamesEveryJournal: each shard keeps its own journal; the
// merge named only the first shard's.
func TestMergeSoakNamesEveryJournal(t *testing.T) {
	shard := func(i int, scenario, journal string) shardFile {
		info := shardInfo{Command: "soak", Index: i, Of: 2, Args: []string{"--store", "sqlite"}}
		rep := soakReport{Store: "sqlite", Seeds: 2, Plan: []string{"race", "takeover"}, Rows: []soakRow{{Scenario: scenario, Pass: 2}},
			Bad: []string{}, Verdict: check.Pass, Ran: 2, Shard: &info, Journal: journal}
		raw, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return shardFile{path: "shard-" + string(rune('0'+i)) + ".json", info: info, raw: raw}
	}
	out, err := mergeSoak([]shardFile{shard(1, "race", "a/journal.jsonl"), shard(2, "takeover", "b/journal.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printSoak(&b, out)
	if !strings.Contains(b.String(), "journals: a/journal.jsonl, b/journal.jsonl") {
		t.Fatalf("the merge's report names:\n%s", b.String())
	}
}
