package httpfault

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExecForm: a simple command, after its assignments, is exec'd by
// the shell; one with shell operators, expansions or quoted assignments
// is left as it is.
func TestExecForm(t *testing.T) {
	for cmd, want := range map[string]string{
		"/bin/svc --port 8080":           "exec /bin/svc --port 8080",
		"  python3 svc.py 'a  b'":        "  exec python3 svc.py 'a  b'",
		"REDIS_ADDR=x:1 A_1=2 python3 s": "REDIS_ADDR=x:1 A_1=2 exec python3 s",
		"exec /bin/svc":                  "exec /bin/svc",
		"A=1 exec /bin/svc":              "A=1 exec /bin/svc",
		"cd /srv && ./svc":               "cd /srv && ./svc",
		"svc --port $PORT":               "svc --port $PORT",
		"A='x y' svc":                    "A='x y' svc",
		"svc > log":                      "svc > log",
		"A=1":                            "A=1",
		"1A=2 svc":                       "exec 1A=2 svc",
	} {
		if got := execForm(cmd); got != want {
			t.Errorf("execForm(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// TestSimpleCommandIsTheInstance: an instance started as "VAR=x prog"
// is prog itself, not a shell with prog as its child: the process that
// Pdeathsig kills with a run killed by SIGKILL is the service (Debian's
// sh kept the service as its child, and it outlived the run).
func TestSimpleCommandIsTheInstance(t *testing.T) {
	RegistryDir = t.TempDir()
	in := NewInstance("i", 0, "IDEM_X=1 sleep 60", nil, nil)
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Kill() }()
	pid := in.proc.Process.Pid
	comm := ""
	for deadline := time.Now().Add(10 * time.Second); comm != "sleep"; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err != nil {
			t.Fatal(err)
		}
		comm = strings.TrimSpace(string(b))
		if time.Now().After(deadline) {
			t.Fatalf("the instance's process is %q, want sleep", comm)
		}
	}
}
