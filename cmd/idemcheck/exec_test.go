package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
