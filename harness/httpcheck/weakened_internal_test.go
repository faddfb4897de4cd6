package httpcheck

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/history"
)

// TestWeakenedWithoutASuccess: with charges and successes none of which
// carries a charge id, replay-fidelity is weakened, and said so; with no
// success at all there was nothing to look in, and the note says that,
// not that the service's answers lack the id (they may carry it).
func TestWeakenedWithoutASuccess(t *testing.T) {
	charges := []history.Charge{{ID: "ch_1"}}
	plain := []history.Exchange{{Status: 200, Reply: `{"ok":true}`}}
	if w := Weakened(plain, charges); !strings.HasPrefix(w, "no answer carries the provider's charge id") {
		t.Errorf("successes without the id: %q", w)
	}
	failed := []history.Exchange{{Status: 502, Reply: `{"error":"charge failed"}`}}
	if w := Weakened(failed, charges); !strings.HasPrefix(w, "no request got a success") {
		t.Errorf("no success: %q", w)
	}
	echoed := []history.Exchange{{Status: 201, Reply: `{"charge":"ch_1"}`}}
	if w := Weakened(echoed, charges); w != "" {
		t.Errorf("a success with the id: %q", w)
	}
}
