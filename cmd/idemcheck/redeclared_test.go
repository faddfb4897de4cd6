package main

import (
	"strings"
	"testing"
)

// TestRedeclaredLinesMarkTheRunsOwn: a recheck judged by other
// declarations marks the run's own lines it replaced, naming the flag it
// judges by, and adds one for a flag the run had no line of: the report
// said "in-flight TTL: not declared" under "judged by --inflight-ttl=30s".
func TestRedeclaredLinesMarkTheRunsOwn(t *testing.T) {
	run := []string{"keys: UUID v4 in Idempotency-Key", "key required: a request without one must get 400", "in-flight TTL: not declared (…)"}
	got := redeclaredLines(run, []string{"--inflight-ttl=30s", "--saves-errors=true"})
	if len(got) != 4 || got[0] != run[0] || got[1] != run[1] ||
		!strings.HasSuffix(got[2], "(as the run declared it; judged here by --inflight-ttl=30s)") || !strings.Contains(got[3], "--saves-errors=true: declared by this recheck") {
		t.Fatalf("%q", got)
	}
	if run[2] != "in-flight TTL: not declared (…)" {
		t.Errorf("the run's own lines were changed: %q", run)
	}
}
