package execstore

import "testing"

// TestCauseSkipsStackFrames: a death's cause is the stderr line that
// names the error, not a stack frame whose function's name holds the
// word (Node's "at emitErrorCloseNT" was quoted for a store that died of
// a write to a closed pipe).
func TestCauseSkipsStackFrames(t *testing.T) {
	for stderr, want := range map[string]string{
		"node:events:497\n      throw er; // Unhandled 'error' event\n      ^\n\nError: write EPIPE\n    at afterWriteDispatched (node:internal/stream_base_commons:161:15)\n    at emitErrorCloseNT (node:internal/streams/destroy:128:3)\n\nNode.js v20.20.2": "Error: write EPIPE … Node.js v20.20.2",
		"Traceback (most recent call last):\n  File \"store.py\", line 9, in <module>\n    handle(line)\nKeyError: 'token'":                                                                                                                                     "KeyError: 'token'",
		"panic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/store.go:12 +0x1d\nexit status 2":                                                                                                                              "panic: runtime error: index out of range … exit status 2",
		"just a line": "just a line",
	} {
		tl := &tail{}
		_, _ = tl.Write([]byte(stderr))
		if got := tl.cause(); got != want {
			t.Errorf("cause of %q = %q, want %q", stderr, got, want)
		}
	}
}
