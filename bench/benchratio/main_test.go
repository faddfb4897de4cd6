package main

import (
	"strings"
	"testing"
)

// TestParse: each metric of each (backend, goroutines, op) is the median
// of the runs, groups keep their first order, other lines are ignored.
func TestParse(t *testing.T) {
	in := `goos: linux
BenchmarkStores/postgres/replay/g=8-2   	  3000	  333333 ns/op	  1000 replay-ns/op	  800.0 raw-read-ns/op	  0.80 store/raw-read
BenchmarkStores/postgres/replay/g=8-2   	  3000	  333333 ns/op	  3000 replay-ns/op	  900.0 raw-read-ns/op	  0.30 store/raw-read
BenchmarkStores/postgres/replay/g=8-2   	  3000	  333333 ns/op	  2000 replay-ns/op	  700.0 raw-read-ns/op	  0.35 store/raw-read
BenchmarkStores/sqlite/claim/g=1        	  10	  5 ns/op	  7 claim-ns/op
PASS
`
	got, groups, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0] != (group{"postgres", 8}) || groups[1] != (group{"sqlite", 1}) {
		t.Fatalf("groups %v", groups)
	}
	m := got[group{"postgres", 8}]["replay"]
	if m["replay-ns/op"] != 2000 || m["raw-read-ns/op"] != 800 || m["store/raw-read"] != 0.35 {
		t.Fatalf("medians %v", m)
	}
	if v := got[group{"sqlite", 1}]["claim"]["claim-ns/op"]; v != 7 {
		t.Fatalf("sqlite claim %v", v)
	}
	if median([]float64{4, 1, 3, 2}) != 2.5 {
		t.Fatal("median of an even count")
	}
}
