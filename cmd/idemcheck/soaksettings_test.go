package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSoakAtTheStoresSettings: --lock-ttl, --retention, --keys and
// --clients set every run of a soak, as check's do, and the soak says
// so (a TypeScript store's author could soak it only at the defaults);
// beside --random-flags, which draws them, each is refused.
func TestSoakAtTheStoresSettings(t *testing.T) {
	code, stdout, stderr := runCLI(t, "soak", "--store", "memory", "--seeds", "1", "--hogs", "0", "--scenario", "race",
		"--lock-ttl", "2s", "--retention", "24h", "--keys", "3", "--clients", "2", "--json", "--out", t.TempDir())
	if code != exitPass {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	var rep struct {
		Settings string `json:"settings"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Settings != "LockTTL 2s, retention 24h0m0s, 3 keys, 2 clients" {
		t.Errorf("settings %q", rep.Settings)
	}
	code, _, stderr = runCLI(t, "soak", "--store", "memory", "--random-flags", "--keys", "3", "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "--random-flags draws it") {
		t.Errorf("--keys beside --random-flags: exit %d, %s", code, stderr)
	}
}
