package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONAtOnce: a --json run stopped at once by a second signal still
// prints one object, naming its directory and how to read it (a check
// --json stopped so printed nothing); once the command prints its own
// object, the stop prints none.
func TestJSONAtOnce(t *testing.T) {
	var out bytes.Buffer
	withdraw := jsonAtOnce(true, &out, "check", "/tmp/results/run")
	printAtOnce()
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got["verdict"] != "unknown" || got["interrupted"] != true ||
		got["results_dir"] != "/tmp/results/run" || !strings.Contains(got["stopped"].(string), "idemcheck recheck /tmp/results/run") {
		t.Fatalf("%v: %s", err, out.String())
	}
	out.Reset()
	printAtOnce() // printed once only
	withdraw()
	jsonAtOnce(true, &out, "check", "/tmp/x")()
	jsonAtOnce(false, &out, "check", "/tmp/y") // not a --json run: nothing owed
	printAtOnce()
	if out.Len() != 0 {
		t.Fatalf("printed after the command took over: %s", out.String())
	}
}

// TestJSONInterruptedAtStart: every command with --json, interrupted
// before it ran anything, prints one JSON object that says it was
// interrupted (lab printed nothing, demo a text line).
func TestJSONInterruptedAtStart(t *testing.T) {
	for _, args := range [][]string{
		{"check", "--store", "memory", "--json", "--out", t.TempDir()},
		{"lab", "--store", "memory", "--json"},
		{"soak", "--store", "memory", "--seeds", "1-2", "--hogs", "0", "--json", "--out", t.TempDir()},
		{"mutants", "--store", "memory", "--json", "--out", t.TempDir()},
		{"mutate", "--store", "memory", "--json", "--out", t.TempDir()},
		{"demo", "select-then-insert", "--store", "memory", "--json"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var so, se bytes.Buffer
		code := run(ctx, args, &so, &se)
		var got map[string]any
		if err := json.Unmarshal(so.Bytes(), &got); code != exitUnknown || err != nil || got["interrupted"] != true {
			t.Errorf("%v: exit %d, %v, stdout %.300s, stderr %.300s", args[:2], code, err, so.String(), se.String())
		}
	}
}
