package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/servers"
	"github.com/idemcheck/idemcheck/internal/exampletest"
)

// TestExecProtocolErrorIsOneLineExit2: a store that breaks the protocol,
// in its hello or in a later answer, stops the run with one line that
// names the line, and exit 2.
func TestExecProtocolErrorIsOneLineExit2(t *testing.T) {
	out := t.TempDir()
	hello := `{"type":"hello","protocol":1,"name":"sh","clock":"caller"}`
	cases := []struct {
		name, cmd, want string
	}{
		{"unknown field in the hello", `echo '{"type":"hello","protocol":1,"name":"sh","clock":"caller","colour":"blue"}'; cat >/dev/null`,
			`line 1 "{\"type\":\"hello\",\"protocol\":1,\"name\":\"sh\",\"clock\":\"caller\",\"colour\":\"blue\"}": json: unknown field "colour"`},
		{"not JSON", `echo 'hello there'; cat >/dev/null`, `line 1 "hello there"`},
		{"old protocol", `echo '{"type":"hello","protocol":0,"name":"sh","clock":"caller"}'; cat >/dev/null`, "protocol 0, idemcheck speaks 1"},
		{"unknown field in an answer", `echo '` + hello + `'; read open; echo '{"type":"ok","id":1,"extra":true}'; cat >/dev/null`,
			`line 2 "{\"type\":\"ok\",\"id\":1,\"extra\":true}": json: unknown field "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "check", "--store", "exec", "--cmd", c.cmd, "--scenario", "race", "--out", out)
			if code != exitUsage {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "protocol error") || !strings.Contains(stderr, c.want) {
				t.Fatalf("stderr %q: want one line with %q", stderr, c.want)
			}
		})
	}
}

// TestExecConfigFile: --config names the store, its command and its
// variant; a flag given wins over it.
func TestExecConfigFile(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "store.json")
	if err := os.WriteFile(cfg, []byte(`{"store": "exec", "cmd": "echo '{\"type\":\"hello\",\"protocol\":1,\"name\":\"sh\",\"clock\":\"caller\"}'; cat >/dev/null", "variant": "nope"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "check", "--config", cfg, "--scenario", "race", "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, `store exec has no variant "nope"`) {
		t.Fatalf("exit %d, stderr %q: want the config's store and variant (exit 2: sh has no variant nope)", code, stderr)
	}
	code, _, stderr = runCLI(t, "check", "--config", cfg, "--cmd", "echo hi; cat >/dev/null", "--scenario", "race", "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, `line 1 "hi"`) {
		t.Fatalf("exit %d, stderr %q: want --cmd to win over the config's cmd", code, stderr)
	}
}

// TestSoakOfAnExecStore: a store in another language soaks as it checks
// (--store exec --cmd), here the JavaScript example in a real node
// process, on drawn flags: every draw passes, and each draw's check
// command, in the journal, names the store's command.
func TestSoakOfAnExecStore(t *testing.T) {
	t.Parallel()
	cmd := jsExampleCmd(t)
	out := t.TempDir()
	// Draw seed 2: twenty scenario runs in about 4 s, idle.
	code, stdout, stderr := runCLI(t, "soak", "--store", "exec", "--cmd", cmd, "--random-flags", "--draw-seed", "2", "--seeds", "1-2",
		"--budget", "3s", "--hogs", "0", "--out", out)
	if code != exitPass {
		t.Fatalf("exit %d: the example store did not pass every draw:\n%s\n%s", code, stdout, stderr)
	}
	journals, _ := filepath.Glob(filepath.Join(out, "*-soak", harness.JournalFile))
	if len(journals) != 1 {
		t.Fatalf("journals %v", journals)
	}
	b, err := os.ReadFile(journals[0])
	if err != nil {
		t.Fatal(err)
	}
	draws := 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e soakEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("journal line %s: %v", l, err)
		}
		if e.Type != "seed" {
			continue
		}
		draws++
		if want := fmt.Sprintf("idemcheck check --store exec --cmd %q ", cmd); !strings.HasPrefix(e.Draw, want) {
			t.Errorf("draw %q does not begin %q", e.Draw, want)
		}
	}
	if draws != 2 {
		t.Errorf("the journal has %d ended draws, want 2:\n%s", draws, b)
	}
}

// jsExampleCmd is the command that runs the JavaScript example store in
// node (with Debian's sqlite3 module: scripts/node-sqlite3.sh); without
// them the test skips, or fails under IDEM_REQUIRE_SERVERS=1.
func jsExampleCmd(t *testing.T) string {
	t.Helper()
	nodePath := exampletest.NodePath()
	exampletest.NeedRuntime(t, servers.Required(), []string{"NODE_PATH=" + nodePath}, "node", "-e", `require("sqlite3")`)
	script, err := filepath.Abs("../../examples/exec-js-sqlite/store.js")
	if err != nil {
		t.Fatal(err)
	}
	return "NODE_PATH=" + nodePath + " node " + script
}

// TestWorkersSaysAFailpointNoWorkerPassed: the JavaScript example names
// begin.after-select in its hello, and only its select-then-insert variant
// passes it; seed 1's workers round plans a kill there, which cannot
// happen on the correct variant, and the note says why.
func TestWorkersSaysAFailpointNoWorkerPassed(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "check", "--store", "exec", "--cmd", jsExampleCmd(t), "--scenario", "workers", "--seed", "1", "--out", t.TempDir())
	if code != exitPass {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "at begin.after-select on ") || !strings.Contains(stdout, "(no worker passed begin.after-select in this round)") {
		t.Errorf("the note does not say no worker passed begin.after-select:\n%s", stdout)
	}
}

// TestLossyLinkPassesStrictAvailability: the JavaScript example behind
// scripts/lossy-exec.py, which loses a third of its answers (code lost),
// passes --strict-availability: a 409 lost on the way is the link's
// fault, not an error the store chose. Before the code said so, the same
// run failed availability on both scenarios.
func TestLossyLinkPassesStrictAvailability(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("../../scripts/lossy-exec.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := "LOSS=0.3 LOSS_SEED=1 python3 " + script + " env " + jsExampleCmd(t)
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--store", "exec", "--cmd", cmd, "--scenario", "sched-takeover,crash", "--strict-availability", "--out", out)
	if code != exitPass {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	reports, _ := filepath.Glob(filepath.Join(out, "*", "report.md"))
	var all []byte
	for _, r := range reports {
		b, err := os.ReadFile(r)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if !strings.Contains(string(all), "had their answer lost by a fault injector") {
		t.Errorf("the reports (%q) do not count the lost answers apart:\n%s", reports, all)
	}
}

// TestExecProtocolErrorKeepsWhatFailed: a store that breaks the protocol
// after a scenario found its bug stops the run there, and the run is
// written and reported, the protocol error named: the violation found
// stands (exit 1), where the run was thrown away and exit 2 hid it. The
// store is the JavaScript example's unfenced-complete variant, its
// third process (the first scenario's are its hello's and its own)
// answering one line with a field the protocol does not have.
func TestExecProtocolErrorKeepsWhatFailed(t *testing.T) {
	js := jsExampleCmd(t)
	count := filepath.Join(t.TempDir(), "starts")
	cmd := fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null | wc -l); echo x >> %[1]s; if [ "$n" -ge 2 ]; then %[2]s | sed -u '20s/}$/,"debug":1}/'; else %[2]s; fi`, count, js)
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--store", "exec", "--cmd", cmd, "--variant", "unfenced-complete", "--scenario", "sched-takeover,sched-crash",
		"--parallel", "1", "--out", out)
	if code != exitFail || !strings.Contains(stdout, "sched-takeover fail") || !strings.Contains(stdout, "the store broke the protocol") ||
		!strings.Contains(stdout, `unknown field "debug"`) {
		t.Fatalf("exit %d, want 1:\n%s\n%s", code, stdout, stderr)
	}
	if reports, _ := filepath.Glob(filepath.Join(out, "*", "report.md")); len(reports) == 0 {
		t.Errorf("the run's report was not kept: %v", reports)
	}
}

// TestExecStoreDeathNamesItsCause: a store that dies before its hello
// is named with the cause its runtime printed, not only the runtime's
// last line: Node ends an uncaught exception's stack with "Node.js vN",
// which was all the message said.
func TestExecStoreDeathNamesItsCause(t *testing.T) {
	exampletest.NeedRuntime(t, servers.Required(), nil, "node", "-e", "0")
	exampletest.NeedRuntime(t, servers.Required(), nil, "python3", "-c", "0")
	for cmd, want := range map[string]string{
		`node -e "require('idemcheck-no-such-module')"`: "Error: Cannot find module 'idemcheck-no-such-module'",
		`python3 -c "import idemcheck_no_such_module"`:  "ModuleNotFoundError: No module named 'idemcheck_no_such_module'",
	} {
		code, _, stderr := runCLI(t, "check", "--store", "exec", "--cmd", cmd, "--scenario", "race", "--out", t.TempDir())
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, stderr %q: want exit 2 and %q", cmd, code, stderr, want)
		}
	}
}

// TestExecStoreDeathOnItsOwnIsSaid: a store process that dies mid-run,
// not at a crash idemcheck injected (here its input is cut after 60
// lines, and it ends as a store with a bug or killed from outside would,
// between two calls), is started again; the run must not fail the
// correct store, and it must say the process died: it passed saying
// nothing of it, and a death between calls left nothing else behind.
func TestExecStoreDeathOnItsOwnIsSaid(t *testing.T) {
	js := jsExampleCmd(t)
	count := filepath.Join(t.TempDir(), "starts")
	cmd := fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null | wc -l); echo x >> %[1]s; if [ "$n" -eq 1 ]; then sed -u 60q | %[2]s; else %[2]s; fi`, count, js)
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--store", "exec", "--cmd", cmd, "--scenario", "race", "--out", out)
	if code == exitFail || code == exitUsage {
		t.Fatalf("exit %d on a correct store whose process died:\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "the store's process died on its own 1 time(s)") {
		t.Errorf("the run does not say the store's process died:\n%s", stdout)
	}
	reports, _ := filepath.Glob(filepath.Join(out, "2*", "report.md"))
	if len(reports) != 1 {
		t.Fatalf("reports: %v", reports)
	}
	if b, _ := os.ReadFile(reports[0]); !strings.Contains(string(b), "died on its own") {
		t.Errorf("report.md does not say the store's process died")
	}
}

// TestExecStoreOpenFailureKeepsTheRun: a scenario whose store cannot
// open (here the third start of the store exits at once, as a store
// whose connection timed out under load does) is undecided, the error
// said, and the run goes on and reports: it was thrown away, exit 2,
// nothing written, the scenarios that had passed with it. A store that
// no scenario can open is still a setup error.
func TestExecStoreOpenFailureKeepsTheRun(t *testing.T) {
	js := jsExampleCmd(t)
	count := filepath.Join(t.TempDir(), "starts")
	cmd := fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null | wc -l); echo x >> %[1]s; if [ "$n" -eq 2 ]; then echo "could not connect: timeout expired" >&2; exit 1; fi; %[2]s`, count, js)
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "check", "--store", "exec", "--cmd", cmd, "--scenario", "race,mismatch,error", "--parallel", "1", "--out", out)
	if code != exitUnknown {
		t.Fatalf("exit %d, want 3 (one scenario could not be set up):\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"race     pass", "error    pass", "mismatch unknown", "could not be set up", "could not connect: timeout expired"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the run does not say %q:\n%s", want, stdout)
		}
	}
	if reports, _ := filepath.Glob(filepath.Join(out, "2*", "summary.json")); len(reports) != 1 {
		t.Errorf("the run's summary was not written: %v", reports)
	}
	// A store that no scenario can open is a setup error, as before: exit
	// 2, the error said, nothing having run.
	never := filepath.Join(t.TempDir(), "starts")
	cmd = fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null | wc -l); echo x >> %[1]s; if [ "$n" -ge 1 ]; then echo "could not connect: timeout expired" >&2; exit 1; fi; %[2]s`, never, js)
	code, stdout, stderr = runCLI(t, "check", "--store", "exec", "--cmd", cmd, "--scenario", "race,mismatch", "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "could not connect: timeout expired") {
		t.Errorf("a store that never opens: exit %d, want 2 and its error:\n%s\n%s", code, stdout, stderr)
	}
}

// TestDemoOfAnExecStoresOwnBug: demo scripts only the bugs it knows. A
// variant an exec store names for itself is sent to check; a scripted
// bug the store does not declare is named as one to declare (a
// TypeScript store's "ms-unit" got the built-in stores' mutants listed).
func TestDemoOfAnExecStoresOwnBug(t *testing.T) {
	cmd := jsExampleCmd(t)
	code, _, stderr := runCLI(t, "demo", "ms-unit", "--store", "exec", "--cmd", cmd)
	if code != exitUsage || !strings.Contains(stderr, "not a bug demo knows") || !strings.Contains(stderr, "--variant ms-unit") {
		t.Errorf("demo of a store's own variant: exit %d, %s", code, stderr)
	}
	code, _, stderr = runCLI(t, "demo", "blind-takeover", "--store", "exec", "--cmd", cmd)
	if code != exitUsage || !strings.Contains(stderr, `does not declare "blind-takeover" among its hello's variants`) {
		t.Errorf("demo of a scripted bug the store does not declare: exit %d, %s", code, stderr)
	}
}
