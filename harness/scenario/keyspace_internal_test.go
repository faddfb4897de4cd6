package scenario

import (
	"slices"
	"testing"
)

// TestForeignKeysLinear: abuse sends each key every other key's token up
// to foreignTokens others, then its nearest neighbours only, never its
// own, each once.
func TestForeignKeysLinear(t *testing.T) {
	for _, n := range []int{2, 10, foreignTokens + 1, foreignTokens + 2, 10_000} {
		total := 0
		for k := 0; k < n; k++ {
			got := foreignKeys(k, n)
			total += len(got)
			if slices.Contains(got, k) {
				t.Fatalf("n=%d: key %d gets its own token", n, k)
			}
			s := slices.Clone(got)
			slices.Sort(s)
			if len(slices.Compact(s)) != len(got) {
				t.Fatalf("n=%d: key %d gets a token twice: %v", n, k, got)
			}
			if n-1 <= foreignTokens && len(got) != n-1 {
				t.Fatalf("n=%d: key %d gets %d tokens, want every other key's", n, k, len(got))
			}
			if want := (k + 1) % n; !slices.Contains(got, want) {
				t.Fatalf("n=%d: key %d does not meet its neighbour %d", n, k, want)
			}
		}
		if total > n*foreignTokens {
			t.Errorf("n=%d: %d foreign tokens in all, more than %d per key", n, total, foreignTokens)
		}
	}
}
