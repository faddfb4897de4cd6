package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/results"
)

// TestCountsReadAsSentences: the summary counts scenarios by how they
// ended, skipped ones apart, and counts one thing in the singular.
func TestCountsReadAsSentences(t *testing.T) {
	runs := func(vs ...check.Verdict) []results.ScenarioResult {
		var out []results.ScenarioResult
		for _, v := range vs {
			out = append(out, results.ScenarioResult{Verdict: v})
		}
		return out
	}
	for _, c := range []struct {
		runs []results.ScenarioResult
		want string
	}{
		{runs(check.Pass, check.Pass, check.Skipped), "2 scenarios passed, 1 skipped"},
		{runs(check.Pass), "1 scenario passed"},
		{runs(check.Pass, check.Fail, check.Skipped, check.Unknown), "1 scenario failed, 1 undecided, 1 passed, 1 skipped"},
		{nil, "no scenario ran"},
	} {
		if got := countVerdicts(c.runs); got != c.want {
			t.Errorf("countVerdicts = %q, want %q", got, c.want)
		}
	}
	if plural(1, "client") != "1 client" || plural(6, "client") != "6 clients" {
		t.Errorf("plural: %q, %q", plural(1, "client"), plural(6, "client"))
	}
}

// TestProgressShowsSkipsInPlace: a skipped scenario's line says why, and
// every line replaces the last one.
func TestProgressShowsSkipsInPlace(t *testing.T) {
	var b bytes.Buffer
	printProgress(&b, harness.Progress{Scenario: "network", Index: 10, Total: 21, Skipped: "network faults need a server", Done: true, Elapsed: time.Second})
	printProgress(&b, harness.Progress{Scenario: "sched-race", Index: 11, Total: 21, Elapsed: time.Second})
	out := b.String()
	if !strings.Contains(out, "[10/21]") || !strings.Contains(out, "skipped: network faults need a server") || strings.Contains(out, "\n") ||
		strings.Count(out, "\r\033[K") != 2 {
		t.Errorf("progress: %q", out)
	}
	// Names line up: the column after the name starts at the same place
	// whatever the name (as wide as the longest scenario name).
	lines := strings.Split(out, "\r\033[K")
	if len(lines) != 3 || strings.Index(lines[1], "skipped") != strings.Index(lines[2], "sched-race")+nameWidth()+1 ||
		strings.Index(lines[1], "network") != strings.Index(lines[2], "sched-race") {
		t.Errorf("progress columns do not line up: %q", lines)
	}
}

// TestDrawProgress: a soak's seed that runs long says where it is in a
// log, one line a logProgressEvery at most however many scenarios tick,
// and once, when it has run past twice its forecast and half a minute,
// that it has and why; a short one says nothing until the soak's own line.
func TestDrawProgress(t *testing.T) {
	var b strings.Builder
	p := &drawProgress{w: &b, i: 2, n: 5, seed: 7, forecast: 10 * time.Second, slowReason: slowReason(true)}
	at := func(scenario string, elapsed time.Duration, done bool) {
		p.report(harness.Progress{Scenario: scenario, Index: 1, Total: 3, Ops: 40, Elapsed: elapsed, Done: done})
	}
	at("race", 5*time.Second, false)
	at("race", 6*time.Second, true)
	if b.Len() != 0 {
		t.Fatalf("a short seed said: %q", b.String())
	}
	at("takeover", 31*time.Second, false)
	at("workers", 32*time.Second, false) // another scenario's tick, within the same half minute
	at("takeover", 62*time.Second, false)
	at("takeover", 95*time.Second, false)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		"idemcheck soak: [2/5] seed 7 running: takeover (scenario 1 of 3), 40 calls, 31s elapsed of about 10s",
		"idemcheck soak: [2/5] seed 7 has run 1m2s, past twice its forecast of 10s and half a minute: the forecast prices a call of a store in another language at 2ms",
		"idemcheck soak: [2/5] seed 7 running: takeover (scenario 1 of 3), 40 calls, 1m2s elapsed of about 10s",
		"idemcheck soak: [2/5] seed 7 running: takeover (scenario 1 of 3), 40 calls, 1m35s elapsed of about 10s",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d:\n got %q\nwant %q…", i+1, lines[i], want[i])
		}
	}
}

// TestCheckOverrun: a check run in a log whose forecast is short says
// nothing while it keeps to it; once it has taken twice its forecast and
// half a minute, one line says so and why, and the log's progress lines
// follow, one a logProgressEvery at most. It said nothing for 11 minutes.
func TestCheckOverrun(t *testing.T) {
	var b strings.Builder
	o := &overrun{w: &b, forecast: 10 * time.Second, why: slowCause(true)}
	at := func(elapsed time.Duration, done bool) {
		o.report(harness.Progress{Scenario: "sched-race", Index: 2, Total: 5, Ops: 40, Elapsed: elapsed, Done: done})
	}
	at(5*time.Second, false)
	at(40*time.Second, true)
	if b.Len() != 0 {
		t.Fatalf("a run within its forecast said: %q", b.String())
	}
	at(51*time.Second, false)
	at(60*time.Second, false) // within logProgressEvery of the last line
	at(90*time.Second, false)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		"idemcheck: this run has taken 51s, past twice its forecast of 10s and half a minute: the forecast prices a call of a store in another language at 2ms",
		"idemcheck: [2/5] sched-race running: 40 calls, 0 faults, 51s elapsed",
		"idemcheck: [2/5] sched-race running: 40 calls, 0 faults, 1m30s elapsed",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d:\n got %q\nwant %q…", i+1, lines[i], want[i])
		}
	}
}

// TestDumbTerminalGetsNoRedraw: a terminal whose TERM is dumb showed the
// progress line's "\r\033[K" as it is; it gets the log lines a file gets.
func TestDumbTerminalGetsNoRedraw(t *testing.T) {
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		tty, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0) // a character device too
	}
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	t.Setenv("TERM", "xterm")
	if !isTerminal(tty) {
		t.Fatalf("%s is not taken for a terminal", tty.Name())
	}
	t.Setenv("TERM", "dumb")
	if isTerminal(tty) {
		t.Errorf("%s with TERM=dumb is taken for a terminal that redraws", tty.Name())
	}
}
