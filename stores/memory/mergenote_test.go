package memory_test

import (
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/harness/idemtest"
)

// TestModelNamesAMergedKey: the model test's failure on a store that
// merges keys names the key the store merged the failing one with, as a
// lower-casing Redis store's failure showed only the one key's history.
func TestModelNamesAMergedKey(t *testing.T) {
	for _, m := range []string{"case-folded-key", "tenant-blind"} {
		t.Run(m, func(t *testing.T) {
			msg := idemtest.ExpectFailure(t, factory(), m)
			if !strings.Contains(msg, "the test never used this key before") || !strings.Contains(msg, "merges it with") {
				t.Errorf("the failure does not point at a merged key:\n%s", msg)
			}
		})
	}
}
