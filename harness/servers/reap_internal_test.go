package servers

import (
	"net/url"
	"os"
	"strconv"
	"testing"
)

// TestOwnerAliveInAnotherPIDNamespace: a CI job in a container of its own
// PID namespace, on the host's network (so its hostname) and the host's
// Docker socket, took the host's live runs for dead (their pids are not
// in its /proc) and removed their servers. A process of another PID
// namespace is left alone; a dead one of this namespace, or one named by
// a label from before the namespace was written, is not.
func TestOwnerAliveInAnotherPIDNamespace(t *testing.T) {
	ns := pidNamespace()
	if ns == "" {
		t.Skip("no /proc/self/ns/pid here")
	}
	host, _ := os.Hostname()
	h := url.PathEscape(host)
	const dead = "999999999"
	for label, want := range map[string]bool{
		owner():                             true,
		h + "/" + dead + "/1/" + ns:         false,
		h + "/" + dead + "/1/1" + ns:        true, // another namespace
		h + "/" + dead + "/1":               false,
		"elsewhere/" + dead + "/1/" + ns:    true,
		h + "/" + strconv.Itoa(os.Getpid()): true, // unparseable
	} {
		if got := ownerAlive(label); got != want {
			t.Errorf("ownerAlive(%q) = %v, want %v", label, got, want)
		}
	}
}
