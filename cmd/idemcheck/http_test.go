package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestHTTPBadTarget: a refused port and a server that does not speak HTTP
// each give one line on stderr and exit 2, before any traffic.
func TestHTTPBadTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()

	notHTTP, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer notHTTP.Close()
	go func() {
		for {
			c, err := notHTTP.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_, _ = c.Read(buf)
			_, _ = c.Write([]byte("+PONG\r\n"))
			c.Close()
		}
	}()

	for _, tc := range []struct{ url, want string }{
		{"http://" + refused + "/orders", "connection refused"},
		{"http://" + notHTTP.Addr().String() + "/orders", "not an HTTP server"},
		{"ftp://" + refused, "want an http:// or https:// URL"},
	} {
		code, stdout, stderr := runCLI(t, "http", "--target", tc.url, "--out", t.TempDir())
		if code != exitUsage {
			t.Errorf("%s: exit %d, want 2 (stdout %q)", tc.url, code, stdout)
		}
		if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: stderr %q: want one line saying %q", tc.url, stderr, tc.want)
		}
	}
}

// TestHTTPFlagBounds: a setting past what the machine can hold (an
// instance is a process, the history is held in memory) is refused with
// one line and exit 2, before anything starts: --instances 5000 started
// thousands of a service's processes, and the run outlived its SIGTERM.
func TestHTTPFlagBounds(t *testing.T) {
	for _, args := range [][]string{
		{"--cmd", "true", "--instances", "17"},
		{"--cmd", "true", "--instances", "0"},
		{"--target", "http://127.0.0.1:1/orders", "--clients", "257"},
		{"--target", "http://127.0.0.1:1/orders", "--duration", "2h"},
		{"--target", "http://127.0.0.1:1/orders", "--attempts", "101"},
	} {
		code, _, stderr := runCLI(t, append([]string{"http", "--out", t.TempDir()}, args...)...)
		if code != exitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "at most") {
			t.Errorf("%v: exit %d, stderr %q: want one line naming the bound, exit 2", args, code, stderr)
		}
	}
}

// TestHTTPCommandThatEnds: a --cmd that ends at once (a script that
// starts the service in the background and returns) is named as such,
// one line, exit 2, where the message said "(<nil>)".
func TestHTTPCommandThatEnds(t *testing.T) {
	code, _, stderr := runCLI(t, "http", "--cmd", "true", "--instances", "1", "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "the command ended; it must run the service until killed") || strings.Contains(stderr, "<nil>") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// blackbox runs idemcheck http against the test service mode (started
// from this test binary), with extra flags, and returns the exit code,
// stdout and the report.
func blackbox(t *testing.T, mode string, env []string, args ...string) (int, string, string) {
	t.Helper()
	code, stdout, report, _ := blackboxIn(t, mode, "", env, args...)
	return code, stdout, report
}

// blackboxIn is blackbox interrupted (its context cancelled, as by
// Ctrl-C) a second after its progress on stderr shows a line with
// interruptAt ("": never); it also returns the results directory. The
// interrupt follows the run's own phases, not a clock: a timer that
// meant the load could land before it on a loaded machine, where the
// service took long to start.
func blackboxIn(t *testing.T, mode, interruptAt string, env []string, args ...string) (int, string, string, string) {
	t.Helper()
	out := t.TempDir()
	base := []string{"http", "--cmd", serviceCmd(t, mode, env...), "--instances", "1", "--duration", "2s", "--settle", "3s",
		"--clients", "4", "--out", out, "--seed", "3"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var so bytes.Buffer
	se := &watchedBuffer{on: interruptAt, then: func() { time.AfterFunc(time.Second, cancel) }}
	code := run(ctx, append(base, args...), &so, se)
	stdout, stderr := so.String(), se.String()
	if interruptAt != "" && !strings.Contains(stderr, interruptAt) {
		t.Fatalf("%s: the run never printed %q (exit %d, stderr %q)", mode, interruptAt, code, stderr)
	}
	report, err := os.ReadFile(filepath.Join(out, "report.txt"))
	if err != nil {
		t.Fatalf("%s: no report (exit %d, stderr %q): %v", mode, code, stderr, err)
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Errorf("%s: no report.html: %v", mode, err)
	}
	return code, stdout, string(report), out
}

// watchedBuffer is a buffer that calls then, once, when what was written
// to it holds on.
type watchedBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	on   string
	then func()
	done bool
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.on != "" && !w.done && strings.Contains(w.buf.String(), w.on) {
		w.done = true
		w.then()
	}
	return n, err
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestHTTPInterruptReports: an interrupt during the load or during the
// final probes still writes the report, history and summary: what was
// recorded is judged (a violation stands: exit 1), what was cut short is
// not (liveness, and whether anything was tested), and without a
// violation the run is undecided (exit 3); recheck judges it the same way.
func TestHTTPInterruptReports(t *testing.T) {
	t.Parallel()
	strict := []string{"--process-faults=false", "-H", "Authorization: Bearer s3cret", "--body-type", "form", "--body", "currency=EUR",
		"--order-at", "ref", "--amount-at", "cents", "--duration", "20s"}
	code, stdout, report, dir := blackboxIn(t, "strict", "idemcheck http: the load:", nil, strict...)
	if code != exitUnknown || !strings.HasPrefix(report, "INTERRUPTED during the load") || !strings.Contains(report, "UNDECIDED liveness") ||
		!strings.Contains(stdout, "INTERRUPTED during the load") {
		t.Fatalf("interrupted during the load: exit %d, report:\n%s", code, report)
	}
	for _, f := range []string{"summary.json", "history.jsonl", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("interrupted run: %v", err)
		}
	}
	if code, out, _ := runCLI(t, "recheck", dir); code != exitUnknown || !strings.HasSuffix(out, "\nUNDECIDED: no violation, but not everything was judged (the \"not judged\" lines above)\n") {
		t.Errorf("recheck of the interrupted run: exit %d, want 3 and its verdict last:\n%s", code, out)
	}

	// lock423 holds the keys of killed owners: with a declared TTL the
	// probes go on long after the load; an interrupt lands among them.
	code, _, report, _ = blackboxIn(t, "lock423", "idemcheck http: the final probes", []string{"IDEM_TEST_DIR=" + t.TempDir()}, "--net-faults=false",
		"--fault-gap", "250ms", "--fault-window", "100ms", "--provider-fail", "0", "--inflight-ttl", "30s")
	if !strings.HasPrefix(report, "INTERRUPTED during the final probes") || strings.Contains(report, "FAIL liveness") ||
		!strings.Contains(report, "the final probes did not run to their end") {
		t.Fatalf("interrupted during the probes: exit %d, report:\n%s", code, report)
	}
	if code != exitFail || !strings.Contains(report, "FAIL status-codes") { // lock423 does not fingerprint
		t.Errorf("a violation recorded before the interrupt: exit %d, report:\n%s", code, report)
	}
}

// TestHTTPRequestShapeFromFlags: a service that accepts only UUID keys,
// wants an Authorization header and a form body, and answers with its own
// payment id, passes with flags alone; without them it answers 400 to
// everything, and the run fails first with "nothing was tested".
func TestHTTPRequestShapeFromFlags(t *testing.T) {
	t.Parallel()
	shape := []string{"--process-faults=false", "-H", "Authorization: Bearer s3cret", "-H", "Host: pay.example.test", "--body-type", "form", "--body", "currency=EUR",
		"--order-at", "ref", "--amount-at", "cents"}
	code, stdout, report := blackbox(t, "strict", []string{"IDEM_TEST_HOST=pay.example.test"}, shape...)
	if code != exitPass {
		t.Fatalf("the strict service with its request declared: exit %d:\n%s", code, stdout)
	}
	for _, want := range []string{"declared request: POST", "form body", "headers: Authorization, Host (values not shown)", "callers: one", "keys: UUID v4", "PASS at-most-once",
		"declared host: every request carries Host: pay.example.test"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "s3cret") {
		t.Error("the report shows the Authorization header's value")
	}
	code, _, report = blackbox(t, "strict", nil, "--process-faults=false", "--net-faults=false")
	if code != exitFail || !strings.HasPrefix(report, "NOTHING TESTED: the service answered 401 to ") {
		t.Fatalf("the strict service without its request: exit %d, report:\n%s", code, report)
	}
}

// TestHTTPDeadService: a service that answers 500 to every keyed request
// fails, saying so first; its liveness does not judge the keys that
// replay one 500 for orders never charged (a service that saves every
// error answers so too), and names the declaration that would.
func TestHTTPDeadService(t *testing.T) {
	t.Parallel()
	code, _, report := blackbox(t, "dead500", nil, "--net-faults=false", "--process-faults=false")
	if code != exitFail || !strings.HasPrefix(report, "NOTHING TESTED: the service answered 500 to ") {
		t.Fatalf("exit %d, report:\n%s", code, report)
	}
	if !strings.Contains(report, "UNDECIDED liveness") || !strings.Contains(report, "--saves-errors") {
		t.Errorf("liveness does not leave the replayed 500s unjudged, naming --saves-errors:\n%s", report)
	}
	if !strings.Contains(report, "faults: none (no instance was killed or paused and no network fault injected") {
		t.Errorf("a run without faults does not say what that left out:\n%s", report)
	}
}

// TestHTTPLockedAfterKill: locks left by killed instances answer 423
// forever. With an in-flight TTL declared, liveness fails with cause
// locked; without one, a key still locked after its owner was killed may
// be a correct service's lock that has not expired yet: the run is
// undecided (exit 3) and says what was not judged and how to judge it;
// recheck with the TTL declared then judges it as the declared run was,
// without running it again.
func TestHTTPLockedAfterKill(t *testing.T) {
	t.Parallel()
	args := []string{"--net-faults=false", "--fault-gap", "250ms", "--fault-window", "100ms", "--provider-latency", "150ms", "--provider-fail", "0"}
	code, _, report := blackbox(t, "lock423", []string{"IDEM_TEST_DIR=" + t.TempDir()}, append(args, "--inflight-ttl", "1s")...)
	if code != exitFail || !strings.Contains(report, "FAIL liveness") || !strings.Contains(report, "locked") || !strings.Contains(report, "423 (still locked)") {
		t.Fatalf("exit %d, report:\n%s", code, report)
	}
	// (The test service does not fingerprint either: status-codes fails
	// whatever liveness says, so the run's exit is 1.)
	_, _, report, dir := blackboxIn(t, "lock423", "", []string{"IDEM_TEST_DIR=" + t.TempDir()}, args...)
	if strings.Contains(report, "FAIL liveness") || !strings.Contains(report, "UNDECIDED liveness") || !strings.Contains(report, "not judged:") ||
		!strings.Contains(report, "--inflight-ttl") {
		t.Fatalf("without a declared TTL: report:\n%s", report)
	}
	code, stdout, stderr := runCLI(t, "recheck", "--inflight-ttl", "1s", dir)
	if code != exitFail || !strings.Contains(stdout, "liveness         then UNDECIDED now FAIL") || !strings.Contains(stdout, "judged by the declarations --inflight-ttl=1s") {
		t.Errorf("recheck with the TTL declared: exit %d:\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "recheck", "--key", "sometimes", dir); code != exitUsage || !strings.Contains(stderr, "required or optional") {
		t.Errorf("recheck --key sometimes: exit %d: %s", code, stderr)
	}
}

// TestHTTPBehindALimiterAndATimeout: a correct service behind a rate
// limiter (429) and a timeout middleware (503 while the handler still
// charges) passes. Its retries' 409s come while the timed-out request's
// work goes on, a 429 to a replay or to a missing key is no answer
// about the key, and a missing key refused 422 is refused: all are said,
// not failed.
func TestHTTPBehindALimiterAndATimeout(t *testing.T) {
	t.Parallel()
	code, _, report := blackbox(t, "guarded", nil, "--process-faults=false", "--clients", "8",
		"--provider-latency", "60ms", "--provider-fail", "0")
	if code != exitPass {
		t.Fatalf("exit %d, report:\n%s", code, report)
	}
	// Every charge outlasts the timeout: the retries met the key in
	// flight, and the limiter answered.
	if m := regexp.MustCompile(`judged .*\b([1-9][0-9]*) 409`).FindString(report); m == "" || !strings.Contains(report, " 429 ") || !strings.Contains(report, " 503 ") {
		t.Fatalf("the run did not meet the timeout and the limiter:\n%s", report)
	}
}

// TestHTTPKeyOptionalDeclaredWrongly: a service that requires keys (the
// strict one, never killed: its keyless requests are all answered),
// declared --key optional, refuses the load's keyless requests: the run
// passes (a refusal is no violation) and its report says the
// declaration looks wrong, as its keyless answers went unjudged.
func TestHTTPKeyOptionalDeclaredWrongly(t *testing.T) {
	t.Parallel()
	code, _, report := blackbox(t, "strict", nil, "--net-faults=false", "--process-faults=false", "--key", "optional", "--settle", "1s",
		"-H", "Authorization: Bearer s3cret", "--body-type", "form", "--body", "currency=EUR", "--order-at", "ref", "--amount-at", "cents")
	if code != exitPass {
		t.Fatalf("exit %d, report:\n%s", code, report)
	}
	if !strings.Contains(report, "the service seems to require a key") {
		t.Errorf("the report does not say the declaration looks wrong:\n%s", report)
	}
}

// TestHTTPTooBusyToTest: a correct service that sheds most of the load
// (503) leaves most keys without a success: nothing was tested, which it
// says first, and that is no violation of the service's: undecided (exit
// 3), not failed.
func TestHTTPTooBusyToTest(t *testing.T) {
	t.Parallel()
	code, _, report := blackbox(t, "shedding", nil, "--process-faults=false", "--net-faults=false", "--attempts", "1", "--settle", "1s")
	if code != exitUnknown || !strings.HasPrefix(report, "NOTHING TESTED: the service answered 503 to ") || !strings.Contains(report, "UNDECIDED answers") {
		t.Fatalf("exit %d, report:\n%s", code, report)
	}
}

// TestHTTPOwnIDForgetsOnRestart: the strict service keeps its records in
// memory and answers with its own payment id: a key answered before a
// kill is charged again after the restart, and at-most-once fails
// (after-done), whatever the answers say.
func TestHTTPOwnIDForgetsOnRestart(t *testing.T) {
	t.Parallel()
	// 5 s (not the helper's 2 s): a key must be answered, its instance
	// killed and the key sent again after the restart, and under make
	// test's load a 2 s run sometimes had only kills before any answer
	// (every second charge excused as at-least-once after a crash).
	code, _, report := blackbox(t, "strict", nil, "-H", "Authorization: Bearer s3cret", "--body-type", "form",
		"--order-at", "ref", "--amount-at", "cents", "--net-faults=false", "--fault-gap", "300ms", "--fault-window", "100ms",
		"--duration", "5s")
	if code != exitFail || !strings.Contains(report, "FAIL at-most-once") || !strings.Contains(report, "after-done") {
		t.Fatalf("exit %d, report:\n%s", code, report)
	}
	if !strings.Contains(report, "no answer carries the provider's charge id") {
		t.Errorf("the report does not say the answers never carry the charge id:\n%s", report)
	}
}

// TestHTTPCrashIsAnEvent: an instance that exits by itself mid-run is in
// the report (time, exit status, log tail), restarted, and the run ends
// with a verdict (0 or 1), not 2.
func TestHTTPCrashIsAnEvent(t *testing.T) {
	t.Parallel()
	code, _, report := blackbox(t, "crash", nil, "--net-faults=false", "--process-faults=false")
	if code != exitPass && code != exitFail {
		t.Fatalf("exit %d, report:\n%s", code, report)
	}
	for _, want := range []string{"CRASH: instance i1 exited by itself", "exit status 3", "boom: crashing on keyed request 5", "restarted, answering again"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestHTTPRecheck: a saved black-box run is judged again by recheck with
// the policy it declared, and gets the same verdicts.
func TestHTTPRecheck(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "http", "--cmd", serviceCmd(t, "dead500"), "--instances", "1", "--duration", "1s", "--settle", "1s",
		"--clients", "2", "--net-faults=false", "--process-faults=false", "--key", "optional", "--out", out)
	if code != exitFail {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "recheck", out)
	if code != exitFail || !strings.Contains(stdout, "answers          then FAIL  now FAIL") || strings.Contains(stdout, "(changed)") ||
		!strings.Contains(stdout, "NOTHING TESTED") {
		t.Fatalf("recheck: exit %d:\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "key optional") {
		t.Errorf("recheck lost the declarations:\n%s", stdout)
	}
	// A boolean declaration before the directory, as the help writes it:
	// the directory was taken for the flag's value (exit 2).
	for _, args := range [][]string{{"--saves-errors", out}, {"--saves-errors", "--inflight-ttl", "5s", out}, {out, "--saves-errors"}} {
		if code, stdout, stderr := runCLI(t, append([]string{"recheck"}, args...)...); code == exitUsage || !strings.Contains(stdout, "--saves-errors") {
			t.Errorf("recheck %v: exit %d:\n%s%s", args, code, stdout, stderr)
		}
	}
	// Its history cut at a line's end (a copy cut short) is not judged
	// as the run's: exit 2, saying so.
	cutHistory(t, out)
	if code, stdout, stderr = runCLI(t, "recheck", out); code != exitUsage || !strings.Contains(stderr, "not the whole run's") {
		t.Errorf("recheck of a cut history: exit %d, want 2:\n%s%s", code, stdout, stderr)
	}
}

// cutHistory cuts dir's history.jsonl after its first half of lines.
func cutHistory(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "history.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(path, []byte(strings.Join(lines[:len(lines)/2], "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPConfigFile: the request and the policy given in --config, as
// on flags: the strict service passes, and the report prints each
// declaration (the in-flight TTL raising --settle).
func TestHTTPConfigFile(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "svc.json")
	body := `{"cmd": "` + serviceCmd(t, "strict") + `", "instances": 1, "headers": ["Authorization: Bearer s3cret"],
		"body_type": "form", "body": "currency=EUR", "order_at": "ref", "amount_at": "cents", "key_format": "uuid",
		"max_key_len": 64, "inflight_ttl": "2s", "settle": "1s"}`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(t, "http", "--config", cfg, "--duration", "1s", "--clients", "2", "--process-faults=false", "--out", out)
	if code != exitPass {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"headers: Authorization", "max key length: 64 bytes", "in-flight TTL: 2s", "final probes run up to 4s", `order in "ref"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
}

// TestNeverAnswered: a run with no answer at all says that the service
// answers slower than --timeout when every request ran out of it, and
// else points at the instance logs with the last request's error.
func TestNeverAnswered(t *testing.T) {
	timedOut := history.Exchange{Return: history.Never, Err: "timeout"}
	refused := history.Exchange{Return: history.Never, Err: "connection refused"}
	err := neverAnswered([]history.Exchange{timedOut, timedOut}, 30*time.Millisecond, "DIR")
	if !strings.Contains(err.Error(), "answered none of 2 requests within --timeout 30ms") || !strings.Contains(err.Error(), "a longer --timeout") {
		t.Errorf("every request timed out: %v", err)
	}
	err = neverAnswered([]history.Exchange{timedOut, refused}, 30*time.Millisecond, "DIR")
	if !strings.Contains(err.Error(), "never answered a request (see the instance logs in DIR; the last request: connection refused)") {
		t.Errorf("refused: %v", err)
	}
}
