package httpcheck

import (
	"strings"
	"testing"
)

// TestRefusedHintNamesReusedKeys: a service that answers 422 to most
// keys' first requests saw them before, with another body: the hint
// names keys of an earlier run, which a --key-format without %s repeats.
// It sent the user to the key's header and format.
func TestRefusedHintNamesReusedKeys(t *testing.T) {
	if h := refusedHint(422); !strings.Contains(h, "keys of an earlier run") || !strings.Contains(h, "--key-format without %s") {
		t.Errorf("refusedHint(422) = %q", h)
	}
	if h := refusedHint(400); strings.Contains(h, "earlier run") {
		t.Errorf("refusedHint(400) = %q names reused keys", h)
	}
}
