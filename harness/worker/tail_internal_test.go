package worker

import (
	"strings"
	"testing"
)

// TestTailBufferKeepsBothEnds: a worker's stderr keeps its first lines
// (a crash's cause) and its last, with what was left out between them
// counted; a short one is kept whole.
func TestTailBufferKeepsBothEnds(t *testing.T) {
	var b tailBuffer
	b.Write([]byte("runtime/cgo: pthread_create failed\n"))
	b.Write([]byte(strings.Repeat("goroutine dump line\n", 1000)))
	b.Write([]byte("rip 0x7f\n"))
	s := b.String()
	if !strings.HasPrefix(s, "runtime/cgo: pthread_create failed goroutine") || !strings.HasSuffix(s, "rip 0x7f") || !strings.Contains(s, " bytes) … ") {
		t.Errorf("kept %.120q … %.60q", s, s[max(0, len(s)-60):])
	}
	if len(s) > 2*tailKeep+64 {
		t.Errorf("kept %d bytes, want about %d", len(s), 2*tailKeep)
	}
	var short tailBuffer
	short.Write([]byte("a b "))
	short.Write([]byte("c\n"))
	if got := short.String(); got != "a b c" {
		t.Errorf("short: %q", got)
	}
}
