package clip

import (
	"testing"
	"unicode/utf8"
)

// TestBytes: a short text is kept; a long one is cut at or before n
// bytes, never inside a rune, and marked.
func TestBytes(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 5, "abcde…"},
		{"aé", 2, "a…"}, // é is 2 bytes: cutting at 2 would split it
	} {
		got := Bytes(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Bytes(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
