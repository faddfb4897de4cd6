package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/stores"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBadInputIsOneLineExit2(t *testing.T) {
	out := t.TempDir()
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	journaled := t.TempDir() // a run's journal, no summary.json
	if err := os.WriteFile(filepath.Join(journaled, harness.JournalFile), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"unknown store", []string{"check", "--store", "mongo", "--out", out}, "unknown store"},
		{"unknown variant", []string{"check", "--store", "memory", "--variant", "nope", "--out", out}, "no variant"},
		{"unknown scenario", []string{"check", "--store", "memory", "--scenario", "nope", "--out", out}, "unknown scenario"},
		{"unknown flag", []string{"check", "--frob", "--out", out}, "flag provided but not defined"},
		{"zero clients", []string{"check", "--store", "memory", "--clients", "0", "--out", out}, "--clients"},
		{"negative keys", []string{"check", "--store", "memory", "--keys", "-3", "--out", out}, "--keys"},
		{"bad number", []string{"check", "--clients", "many", "--out", out}, "invalid value"},
		{"zero count", []string{"check", "--store", "memory", "--count", "0", "--out", out}, "--count"},
		{"zero parallel", []string{"check", "--store", "memory", "--parallel", "0", "--out", out}, "--parallel"},
		{"short retention", []string{"check", "--store", "memory", "--retention", "500ms", "--out", out}, "--retention"},
		{"long retention", []string{"check", "--store", "memory", "--retention", "25h", "--out", out}, "--retention"},
		{"unwritable junit", []string{"check", "--store", "memory", "--junit", filepath.Join(file, "x.xml"), "--out", out}, "--junit"},
		{"junit in a missing directory", []string{"check", "--store", "memory", "--junit", "/nonexistent/x.xml", "--out", out}, "--junit"},
		{"unwritable out", []string{"check", "--store", "memory", "--out", filepath.Join(file, "sub")}, "cannot write results"},
		{"extra argument", []string{"check", "--store", "memory", "extra", "--out", out}, "unexpected argument"},
		{"bad shard", []string{"soak", "--store", "memory", "--shard", "3/2", "--out", out}, "--shard"},
		{"more shards than mutants", []string{"mutants", "--store", "memory", "--shard", "90/90"}, "at most"},
		{"more shards than runs", []string{"soak", "--store", "memory", "--seeds", "1", "--scenario", "race", "--hogs", "0", "--shard", "2/2", "--out", out}, "only 1 run (seeds × scenarios): use at most 1 shard"},
		{"merge nothing", []string{"merge"}, "name the shards"},
		{"merge a non-report", []string{"merge", file}, "not a --json report"},
		{"replay a missing run", []string{"replay", filepath.Join(out, "nope")}, "is not a run directory"},
		{"recheck a missing run", []string{"recheck", filepath.Join(out, "nope")}, "is not a run directory"},
		{"replay a run with no summary", []string{"replay", journaled}, "recovers it from its journal"},
		{"mutate --only matching nothing", []string{"mutate", "--store", "sqlite", "--only", "no such mutant", "--out", out}, "no generated mutant's ID contains"},
	}
	if os.Geteuid() != 0 { // root can write anywhere
		cases = append(cases, struct {
			name string
			args []string
			want string
		}{"read-only out", []string{"check", "--store", "memory", "--out", ro}, "cannot write results"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout not empty: %q", stdout)
			}
			// A killed run of another test, running beside this one, may
			// leave a SQLite directory this run removes, saying so: that
			// line is not the bad input's (a CI rehearsal failed on it).
			stderr = regexp.MustCompile(`(?m)^idemcheck: removed \d+ SQLite director\(ies\) left in .*\n`).ReplaceAllString(stderr, "")
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("stderr should be one line containing %q, got %q", c.want, stderr)
			}
		})
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != 0 {
		t.Errorf("bad input left files in --out: %v", entries)
	}
}

func TestHelp(t *testing.T) {
	// help of help is the command list (it called itself until the stack overflowed).
	for _, args := range [][]string{{"--help"}, {"help"}, {"check", "--help"}, {"list", "--help"}, {"help", "check"}, {"help", "help"}, {"--help", "--help"}, {"help", "--help"}} {
		code, stdout, _ := runCLI(t, args...)
		if code != 0 || !strings.Contains(stdout, "Usage") && !strings.Contains(stdout, "idemcheck") {
			t.Errorf("%v: exit %d, stdout %q", args, code, stdout)
		}
	}
	_, stdout, _ := runCLI(t, "check", "--help")
	for _, flag := range []string{"-store", "-variant", "-scenario", "-clients", "-keys", "-seed", "-duration", "-json", "-out"} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("check --help does not mention %s", flag)
		}
	}
}

func TestList(t *testing.T) {
	code, stdout, _ := runCLI(t, "list", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var l listing
	if err := json.Unmarshal([]byte(stdout), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Checkers) != len(check.Docs) || len(l.Scenarios) < 6 || len(l.Stores) < 2 {
		t.Fatalf("list is short: %d checkers, %d scenarios, %d stores", len(l.Checkers), len(l.Scenarios), len(l.Stores))
	}
	seen := map[string]bool{}
	for _, m := range l.Mutants {
		if seen[m.Name] {
			t.Errorf("list --json lists %s twice", m.Name)
		}
		seen[m.Name] = true
	}
	code, text, _ := runCLI(t, "list")
	if code != 0 {
		t.Fatalf("list: exit %d", code)
	}
	for m := range seen { // one row each (its story is indented beneath)
		if n := strings.Count(text, "\n  "+m+" "); n != 1 {
			t.Errorf("list prints %d rows for %s", n, m)
		}
	}
	// Each store's row counts its store-side and configuration mutants
	// apart, as the catalogue's sides say.
	for _, s := range l.Stores {
		row := regexp.MustCompile(`\n  ` + regexp.QuoteMeta(s.Name) + ` .*`).FindString(text)
		count := map[stores.Side]int{}
		for _, v := range s.Variants {
			m, _ := stores.LookupMutant(v)
			count[m.Side]++
		}
		for side, word := range map[stores.Side]string{stores.StoreSide: "store-side mutant", stores.ConfigSide: "configuration mutant"} {
			n := count[side]
			named := regexp.MustCompile(fmt.Sprintf(`\b%d %s`, n, word)).MatchString(row)
			if n > 0 && !named || n == 0 && strings.Contains(row, word) {
				t.Errorf("list's row for %s: %q, want %d %ss", s.Name, strings.TrimSpace(row), n, word)
			}
		}
	}
}

// TestCheckSQLite is the skeleton's promise end to end: the correct SQLite
// store passes every scenario with real concurrency, and the two classic
// mutants fail with exit 1, naming the checker and the key.
func TestCheckSQLite(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--store", "sqlite", "--json", "--out", out)
	if code != exitPass {
		t.Fatalf("correct sqlite: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("not a terminal, yet something besides the result was printed: %q", stderr)
	}
	var sum struct {
		Verdict   string `json:"verdict"`
		Store     string `json:"store"`
		Variant   string `json:"variant"`
		Scenarios []struct {
			Name                string `json:"name"`
			Verdict             string `json:"verdict"`
			Ops                 int    `json:"ops"`
			MaxConcurrentBegins int    `json:"max_concurrent_begins"`
			Checkers            []struct {
				Checker string `json:"checker"`
				Verdict string `json:"verdict"`
			} `json:"checkers"`
		} `json:"scenarios"`
		Violations []struct{ Checker, Key, Detail string } `json:"violations"`
		Dir        string                                  `json:"results_dir"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Verdict != "pass" || sum.Store != "sqlite" || sum.Variant != "correct" || len(sum.Scenarios) < 6 {
		t.Fatalf("summary: %+v", sum)
	}
	ran := map[string]bool{}
	for _, s := range sum.Scenarios {
		if s.Verdict == "skipped" {
			continue
		}
		ran[s.Name] = true
		if s.Ops < 20 || len(s.Checkers) != len(check.Docs) {
			t.Errorf("scenario %s: %d ops, %d checkers", s.Name, s.Ops, len(s.Checkers))
		}
		if s.Name == "race" && s.MaxConcurrentBegins < 3 {
			t.Errorf("race had at most %d Begins at once on a key", s.MaxConcurrentBegins)
		}
	}
	for _, name := range []string{"race", "takeover", "crash", "error", "mismatch", "retention"} {
		if !ran[name] {
			t.Errorf("scenario %s did not run on sqlite", name)
		}
	}
	for _, f := range []string{"summary.json", "history.jsonl", "report.md", "report.html", "linearizability-race.html"} {
		if _, err := os.Stat(filepath.Join(sum.Dir, f)); err != nil {
			t.Errorf("results: %v", err)
		}
	}
	if target, err := os.Readlink(filepath.Join(out, "latest")); err != nil || target != filepath.Base(sum.Dir) {
		t.Errorf("latest -> %q (%v), want %s", target, err, filepath.Base(sum.Dir))
	}
	// Which checker names the double claim depends on timing: the two
	// owners' work overlaps (exclusive-execution) unless the machine's load
	// ran them one after the other, and the claims themselves fail
	// linearizability either way (seen once under make test's load).
	for _, m := range []struct {
		variant, scenario string
		checkers          []string
	}{
		{"select-then-insert", "race", []string{"exclusive-execution", "linearizability"}},
		{"unfenced-complete", "takeover", []string{"fencing"}},
	} {
		code, stdout, stderr := runCLI(t, "check", "--store", "sqlite", "--variant", m.variant, "--scenario", m.scenario, "--out", out)
		if code != exitFail {
			t.Fatalf("%s: exit %d, want 1\n%s%s", m.variant, code, stdout, stderr)
		}
		if !slices.ContainsFunc(m.checkers, func(c string) bool { return strings.Contains(stdout, c+" on ") }) {
			t.Errorf("%s: output does not name a checker of %v and a key:\n%s", m.variant, m.checkers, stdout)
		}
		if _, err := os.Stat(filepath.Join(out, "latest", "trace-"+m.scenario+".txt")); err != nil {
			t.Errorf("%s: no trace: %v", m.variant, err)
		}
	}
}

// TestUnreachableServer: a DSN nobody answers, or a wrong password, is a
// setup error: one line, exit 2, well within 15 seconds, no password shown.
func TestUnreachableServer(t *testing.T) {
	cases := []struct{ env, value, want string }{
		{"IDEM_POSTGRES_DSN", "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=5", "postgres"},
		{"IDEM_REDIS_ADDR", "127.0.0.1:1", "redis"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			start := time.Now()
			code, stdout, stderr := runCLI(t, "check", "--store", c.want, "--out", t.TempDir())
			if took := time.Since(start); took > 15*time.Second {
				t.Errorf("took %v", took)
			}
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "cannot reach") {
				t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			if strings.Contains(stderr, "s3cret") {
				t.Errorf("password printed: %q", stderr)
			}
		})
	}
}

// TestInterruptKeepsTheRun: an interrupt at any moment (here before the
// run, while its server would start, and in the middle of it) exits 3
// with a results directory saying what finished, never exit 2 and
// nothing.
func TestInterruptKeepsTheRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		after time.Duration
		args  []string
	}{
		{"while a server starts", 0, []string{"--store", "postgres"}},
		{"mid-run", 1500 * time.Millisecond, []string{"--store", "sqlite"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.after == 0 {
				t.Setenv("IDEM_POSTGRES_DSN", "") // a container would be started
			}
			out := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(c.after, cancel)
			var stdout, stderr bytes.Buffer
			code := run(ctx, append([]string{"check", "--out", out}, c.args...), &stdout, &stderr)
			if code != exitUnknown {
				t.Fatalf("exit %d, want 3; stderr: %s", code, stderr.String())
			}
			if !strings.Contains(stdout.String(), "INTERRUPTED") {
				t.Errorf("the summary does not say the run was interrupted:\n%s", stdout.String())
			}
			b, err := os.ReadFile(filepath.Join(out, "latest", "summary.json"))
			if err != nil {
				t.Fatalf("no results directory: %v", err)
			}
			var sum struct {
				Interrupted bool     `json:"interrupted"`
				NotRun      []string `json:"not_run"`
				Verdict     string   `json:"verdict"`
			}
			if err := json.Unmarshal(b, &sum); err != nil || !sum.Interrupted || sum.Verdict == "pass" {
				t.Errorf("summary.json: %+v (%v), want interrupted and not pass", sum, err)
			}
			if b, err := os.ReadFile(filepath.Join(out, "latest", "report.md")); err != nil || !strings.Contains(string(b), "**Interrupted") {
				t.Errorf("report.md does not say the run was interrupted (%v):\n%s", err, b)
			}
		})
	}
}

// TestMemoryLimitKeepsTheRun: a run past --max-memory stops and reports
// as an interrupted one does (exit 3, results saved, the limit named),
// and a size that does not parse is bad usage.
func TestMemoryLimitKeepsTheRun(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--out", out, "--store", "memory", "--scenario", "race,mismatch",
		"--keys", "5000", "--clients", "32", "--max-memory", "96MB")
	if code != exitUnknown || !strings.Contains(stdout, "INTERRUPTED") || !strings.Contains(stdout, "stopped at the memory limit") {
		t.Fatalf("exit %d, want 3 with the limit named; stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "latest", "summary.json"))
	if err != nil {
		t.Fatalf("no results directory: %v", err)
	}
	var sum struct {
		Interrupted bool   `json:"interrupted"`
		Stopped     string `json:"stopped"`
		Verdict     string `json:"verdict"`
	}
	if err := json.Unmarshal(b, &sum); err != nil || !sum.Interrupted || sum.Stopped == "" || sum.Verdict == "pass" {
		t.Errorf("summary.json: %+v (%v), want interrupted, stopped and not pass", sum, err)
	}
	// The reports say it too: their tables alone would read as the whole run.
	for _, f := range []string{"report.md", "report.html"} {
		if b, err := os.ReadFile(filepath.Join(out, "latest", f)); err != nil || !strings.Contains(string(b), "Stopped: stopped at the memory limit") {
			t.Errorf("%s does not say the run was stopped (%v)", f, err)
		}
	}
	// Not a size (NaN ran with no limit, a fraction of a byte was read
	// as 0, no limit): refused, with the form it takes.
	for _, bad := range []string{"lots", "NaN", "1e-9", "-1MB"} {
		if code, _, stderr := runCLI(t, "check", "--max-memory", bad); code != exitUsage || !strings.Contains(stderr, "512MB or 4GB") {
			t.Errorf("--max-memory %s: exit %d, stderr %q; want 2 and the form it takes", bad, code, stderr)
		}
	}
}

// TestRandomFlagsSoak is the short version of `make soak-flags`: a few
// drawn runs (every flag from its allowed range, a fixed draw seed) on the
// correct memory and SQLite stores, each within a small budget. A correct
// store must pass every draw; a draw that does not pass prints the check
// command that runs it again. Each draw is in the soak's journal, one line
// each, with the drawn command (--retention drawn too). Each draw's files
// are written, so that the reports meet the drawn flags too.
func TestRandomFlagsSoak(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "sqlite"} {
		t.Run(store, func(t *testing.T) {
			out := t.TempDir()
			code, stdout, stderr := runCLI(t, "soak", "--store", store, "--random-flags", "--draw-seed", "7", "--seeds", "1-3",
				"--budget", "3s", "--hogs", "0", "--out", out)
			if code != exitPass && code != exitUnknown {
				t.Fatalf("exit %d: a correct store failed a drawn run:\n%s\n%s", code, stdout, stderr)
			}
			if !strings.Contains(stdout, "3 drawn runs") {
				t.Errorf("the soak did not say it drew 3 runs:\n%s", stdout)
			}
			journals, _ := filepath.Glob(filepath.Join(out, "*-"+store+"-soak", harness.JournalFile))
			if len(journals) != 1 || !strings.Contains(stdout, "journal: "+journals[0]) {
				t.Fatalf("journals %v, the report does not name it:\n%s", journals, stdout)
			}
			b, err := os.ReadFile(journals[0])
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if strings.HasPrefix(l, `{"type":"seed"`) {
					lines = append(lines, l)
				}
			}
			if len(lines) != 3 {
				t.Fatalf("the journal has %d lines of ended draws, want one per draw:\n%s", len(lines), b)
			}
			for _, l := range lines {
				var e soakEntry
				if err := json.Unmarshal([]byte(l), &e); err != nil || e.Verdict == "" || len(e.Scenarios) == 0 || !strings.Contains(e.Draw, "--retention ") {
					t.Errorf("journal line %s: %+v, %v", l, e, err)
				}
				// Every draw's files were written, as check writes them,
				// and a passing draw's removed again.
				if e.WriteSecs <= 0 || (e.Verdict == "pass") == (e.Dir != "") {
					t.Errorf("journal line %s: its files were not written, or a passing draw's kept (dir %q)", l, e.Dir)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(journals[0]), "*-draw")); len(left) > 0 {
				t.Errorf("passing draws' files left behind: %v", left)
			}
		})
	}
}

// TestCheckNamesFindings: a checker's finding (a store that keeps keys
// past their retention) passes, and the summary says so in its own line,
// with the flag that makes it a failure; with that flag the run fails.
func TestCheckNamesFindings(t *testing.T) {
	t.Parallel()
	args := []string{"check", "--store", "memory", "--variant", "never-expire", "--scenario", "retention", "--out", t.TempDir()}
	code, stdout, stderr := runCLI(t, args...)
	if code != exitPass || !strings.Contains(stdout, "finding of retention (retention; a failure with --strict-retention): 8 of 8 keys kept past their retention") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, append(args, "--strict-retention")...)
	if code != exitFail || strings.Contains(stdout, "finding of retention") {
		t.Fatalf("strict: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestCheckSaysWhatIsNotExercised: a store that declares a per-request
// lease, which no scenario of check sends, passes with a line saying the
// declaration was not exercised.
func TestCheckSaysWhatIsNotExercised(t *testing.T) {
	code, stdout, stderr := runCLI(t, "check", "--store", "lease", "--scenario", "race", "--out", t.TempDir())
	if code != exitPass || !strings.Contains(stdout, "not exercised: the store declares per_request_lease") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "check", "--store", "memory", "--scenario", "race", "--out", t.TempDir())
	if code != exitPass || strings.Contains(stdout, "not exercised") {
		t.Fatalf("a store declaring nothing: exit %d, stdout:\n%s", code, stdout)
	}
}

// TestLogProgress: a long run writing to a log says each scenario as it
// ends and where a running one is, one plain line each (no terminal
// codes), and nothing for a tick with nothing to say.
func TestLogProgress(t *testing.T) {
	var b strings.Builder
	logProgress(&b, harness.Progress{Scenario: "race", Index: 1, Total: 3})
	logProgress(&b, harness.Progress{Scenario: "race", Index: 1, Total: 3, Ops: 40, Elapsed: 30 * time.Second})
	logProgress(&b, harness.Progress{Scenario: "race", Index: 1, Total: 3, Ops: 52, Elapsed: 60 * time.Second, Checking: true})
	logProgress(&b, harness.Progress{Scenario: "race", Index: 1, Total: 3, Done: true, Elapsed: 61 * time.Second, Violations: 2})
	want := "idemcheck: [1/3] race running: 40 calls, 0 faults, 30s elapsed\n" +
		"idemcheck: [1/3] race checking (the final probe, then the checkers): 52 calls, 0 faults, 1m0s elapsed\n" +
		"idemcheck: [1/3] race done, 1m1s elapsed, 2 violations so far\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestRandomFlagsKeepTheScenarios: --scenario bounds what --random-flags
// draws (it drew from every scenario, the flag ignored unsaid); the
// header counts draws, not seeds, each draw having a --seed of its own;
// and the draw flags without --random-flags are refused, where they were
// accepted and ignored.
func TestRandomFlagsKeepTheScenarios(t *testing.T) {
	code, stdout, stderr := runCLI(t, "soak", "--store", "memory", "--random-flags", "--draw-seed", "3", "--seeds", "1-2",
		"--budget", "3s", "--hogs", "0", "--scenario", "race,mismatch", "--out", t.TempDir())
	if code != exitPass && code != exitUnknown {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "draws 1..2 of --random-flags") {
		t.Errorf("the header does not count draws:\n%s", stdout)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) > 1 && (f[0] != "race" && f[0] != "mismatch") && len(f) == 6 && f[0] != "all" && f[0] != "scenario" {
			t.Errorf("a scenario not asked for was drawn: %q\n%s", l, stdout)
		}
	}
	for _, flag := range []string{"--draw-seed", "--budget"} {
		val := map[string]string{"--draw-seed": "3", "--budget": "5s"}[flag]
		if code, _, stderr := runCLI(t, "soak", "--store", "memory", "--seeds", "1", "--hogs", "0", "--out", t.TempDir(), flag, val); code != exitUsage || !strings.Contains(stderr, "is for --random-flags") {
			t.Errorf("%s without --random-flags: exit %d, %q", flag, code, stderr)
		}
	}
}

// TestShardSaysItIsOne: a shard's printed report says its verdict is of
// its share of the work only, and how to get the run's: a shard of a
// store's mutants printed "PASS: 3 of 3 mutants killed" of a store
// that has 8, and nothing else.
func TestShardSaysItIsOne(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "mutants", "--store", "memory", "--shard", "2/9", "--out", t.TempDir())
	if code != exitPass || !strings.Contains(stdout, "shard 2/9: the verdict above is of this shard's share of the mutants run only; 'idemcheck merge'") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
}
