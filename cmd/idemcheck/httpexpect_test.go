package main

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/httpcheck"
)

// TestExpectWithoutCause: --expect naming a checker alone passes on any
// cause of its, and when the checker passed, says so without a cause:
// it printed `did not fail with cause ""`.
func TestExpectWithoutCause(t *testing.T) {
	failed := []httpcheck.Result{{Checker: httpcheck.AtMostOnce, Violations: []httpcheck.Violation{{Checker: httpcheck.AtMostOnce, Cause: httpcheck.CauseConcurrent}}}}
	var b strings.Builder
	if code := expected(&b, failed, httpcheck.AtMostOnce, ""); code != exitPass || !strings.Contains(b.String(), "failed with cause "+httpcheck.CauseConcurrent) {
		t.Fatalf("at-most-once failed, none expected in particular: exit %d, %q", code, b.String())
	}
	b.Reset()
	passed := []httpcheck.Result{{Checker: httpcheck.AtMostOnce, Pass: true}}
	if code := expected(&b, passed, httpcheck.AtMostOnce, ""); code != exitFail || b.String() != "NOT as expected: at-most-once did not fail\n" {
		t.Fatalf("at-most-once passed: exit %d, %q", code, b.String())
	}
	b.Reset()
	if code := expected(&b, failed, httpcheck.AtMostOnce, httpcheck.CauseAfterDone); code != exitFail || !strings.Contains(b.String(), `did not fail with cause "after-done"`) {
		t.Fatalf("at-most-once failed with another cause: exit %d, %q", code, b.String())
	}
	// replay-fidelity's violations name no cause: --expect replay-fidelity
	// was never met, however it failed.
	b.Reset()
	replays := []httpcheck.Result{{Checker: httpcheck.Replay, Violations: []httpcheck.Violation{{Checker: httpcheck.Replay}}}}
	if code := expected(&b, replays, httpcheck.Replay, ""); code != exitPass || b.String() != "expected: replay-fidelity failed\n" {
		t.Fatalf("replay-fidelity failed: exit %d, %q", code, b.String())
	}
}
