package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/hunt"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/stores"
)

// TestEveryListedMutantHasADemo: every mutant `idemcheck list --json`
// lists has a demo on its home store whose last line names the mutant, the
// harm it did and, among the checkers that caught it, the one the list
// says catches it (or linearizability, which witnesses any harm); and the
// same schedule on the correct store did no harm.
// Mutants of a server store (redis) skip without Docker, unless
// IDEM_REQUIRE_SERVERS=1.
func TestEveryListedMutantHasADemo(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"list", "--json"}, &out, io.Discard); code != exitPass {
		t.Fatalf("list --json: exit %d", code)
	}
	var l listing
	if err := json.Unmarshal(out.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Mutants) < 20 {
		t.Fatalf("list --json lists %d mutants", len(l.Mutants))
	}
	for _, m := range l.Mutants {
		t.Run(m.Name, func(t *testing.T) {
			// Each demo has its own store (and its own containers for the
			// server mutants): the replicated ones take most of the time,
			// so the rest run beside them.
			t.Parallel()
			if m.Side == "" || m.Scenario == "" || m.Checker == "" || len(m.Stores) == 0 {
				t.Fatalf("list --json leaves a field empty: %+v", m)
			}
			var stdout, stderr bytes.Buffer
			code, err := cmdDemo(context.Background(), []string{m.Name}, &stdout, &stderr)
			if err != nil {
				if b, _ := stores.Lookup(homeStore(m.Name)); b.Lives == stores.Server && errors.Is(err, servers.ErrUnavailable) && !servers.Required() {
					t.Skipf("%v (set %s=1 to fail instead)", err, servers.EnvRequireServers)
				}
				t.Fatalf("demo %s: exit %d: %v\n%s", m.Name, code, err, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			last := lines[len(lines)-1]
			if code != exitPass {
				t.Errorf("demo %s: exit %d\n%s", m.Name, code, stdout.String())
			}
			harm, rest, ok := strings.Cut(last, "harm done: ")
			if !ok || !strings.HasPrefix(harm, m.Name+" ("+m.Side+" side)") || strings.HasPrefix(rest, "no harm") {
				t.Errorf("demo %s: the last line names no harm: %s", m.Name, last)
			}
			_, caught, ok := strings.Cut(rest, "; caught by ")
			caught, correct, _ := strings.Cut(caught, "; the correct store, same schedule: ")
			// The checker the list names, or linearizability: the general
			// witness of a store's harm (the history has no order the
			// table allows). A failover round that lost a claim before
			// the work ran twice is caught by linearizability alone.
			names := strings.Split(caught, ", ")
			if !ok || !slices.Contains(names, m.Checker) && !slices.Contains(names, check.Linearizable) {
				t.Errorf("demo %s: the last line does not name %s, the checker list names: %s", m.Name, m.Checker, last)
			}
			if !strings.HasPrefix(correct, "no harm") {
				t.Errorf("demo %s: the correct store's run of the same schedule: %q", m.Name, correct)
			}
		})
	}
}

// TestDemoFlagsBeforeOrAfter: the mutant may come before or after the
// flags, and an unknown mutant is refused with the mutants' names.
func TestDemoFlagsBeforeOrAfter(t *testing.T) {
	for _, args := range [][]string{{"demo", "--store", "memory", "no-fingerprint"}, {"demo", "no-fingerprint", "--store", "memory"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != exitPass {
			t.Fatalf("%v: exit %d: %s", args, code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "demo no-fingerprint (store side) on memory") {
			t.Errorf("%v: %s", args, stdout.String())
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--store", "memory", "nope"}, io.Discard, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "select-then-insert, ") || strings.Contains(stderr.String(), "[") {
		t.Errorf("demo nope: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"demo", "a", "b"}, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), `unexpected argument "b"`) {
		t.Errorf("demo a b: exit %d: %s", code, stderr.String())
	}
}

// TestDemoShowsValuesAndRows: on SQLite each statement is shown whole with
// its bound values (no :placeholder left), and the key's row after each
// step: none at first, then A's claim, B's claim over it, B's saved answer.
func TestDemoShowsValuesAndRows(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "select-then-insert"}, &stdout, &stderr); code != exitPass {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := strings.Join(strings.Fields(stdout.String()), " ") // statements wrap
	if !regexp.MustCompile(`WHERE tenant = 'demo' AND key = '[^']+'`).MatchString(out) {
		t.Errorf("the demo shows no statement with its tenant and key bound:\n%s", out)
	}
	for _, want := range []string{"'in_flight'", "AND token = '",
		"row: no row", "row: status=in_flight token=", "row: status=done token=", "⇄ A waits at begin.after-select; B runs from run.before-begin"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo lacks %q:\n%s", want, out)
		}
	}
	for _, ph := range []string{":tenant", ":key", ":fingerprint", ":token", ":now"} {
		if strings.Contains(out, ph) {
			t.Errorf("placeholder %s left unbound:\n%s", ph, out)
		}
	}
}

// TestDemoInterruptSaysSo: an interrupted demo says what ran and exits 3,
// not 2 (a setup error).
func TestDemoInterruptSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var so, se bytes.Buffer
	code := run(ctx, []string{"demo", "select-then-insert", "--store", "memory"}, &so, &se)
	if code != exitUnknown || !strings.Contains(so.String(), "INTERRUPTED: the demo of select-then-insert") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr: %s", code, so.String(), se.String())
	}
}

// TestDemoVerdictNeedsAJudgedContrast: a demo passes only when the
// mutant was caught and the correct store's run of the same schedule was
// judged whole and did no harm; a correct run whose workload could not
// finish (a topology that did not come back) once read "no harm: every
// checker passed".
func TestDemoVerdictNeedsAJudgedContrast(t *testing.T) {
	info := &hunt.DemoInfo{Mutant: "m", Side: "config", Store: "s"}
	caught := &hunt.DemoRun{Harm: "HARM: twice", Caught: []string{"at-most-once"}}
	clean := &hunt.DemoRun{Harm: "no harm: every checker passed"}
	notJudged := &hunt.DemoRun{Harm: "not judged: workload incomplete: a new standby", NotJudged: "workload incomplete: a new standby"}
	spoiled := &hunt.DemoRun{Harm: "BROKEN", Caught: []string{"at-most-once"}}
	for _, c := range []struct {
		name      string
		bad, good *hunt.DemoRun
		code      int
		undecided string
	}{
		{"caught, clean contrast", caught, clean, exitPass, ""},
		{"not caught", &hunt.DemoRun{Harm: "no harm"}, clean, exitFail, ""},
		{"contrast not judged", caught, notJudged, exitUnknown, "not judged whole (workload incomplete: a new standby)"},
		{"contrast spoiled", caught, spoiled, exitUnknown, "went wrong as well (at-most-once)"},
	} {
		v, code := demoVerdict(info, c.bad, c.good)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, c.code, v)
		}
		if c.undecided != "" && !strings.Contains(v, "\nUNDECIDED: the correct store's run") || !strings.Contains(v, c.undecided) {
			t.Errorf("%s: verdict %q does not say %q", c.name, v, c.undecided)
		}
		if c.undecided == "" && strings.Contains(v, "UNDECIDED") {
			t.Errorf("%s: verdict %q is undecided", c.name, v)
		}
	}
}
