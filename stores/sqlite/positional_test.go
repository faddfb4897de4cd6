package sqlite

import (
	"slices"
	"testing"
)

// TestPositional: parameters become anonymous, in order, repeated ones
// bound again; quoted text and comments keep their colons.
func TestPositional(t *testing.T) {
	for _, c := range []struct {
		in, out string
		names   []string
	}{
		{`SELECT a FROM t WHERE x = :tenant AND y = :key`, `SELECT a FROM t WHERE x = ? AND y = ?`, []string{"tenant", "key"}},
		{`SELECT :now - b >= :lock_ttl, :now`, `SELECT ? - b >= ?, ?`, []string{"now", "lock_ttl", "now"}},
		{`SELECT 'a:b', 'it''s :x', ":y" FROM t WHERE k = :key`, `SELECT 'a:b', 'it''s :x', ":y" FROM t WHERE k = ?`, []string{"key"}},
		{"SELECT 1 -- :gone\nWHERE k = :key /* :also */", "SELECT 1 -- :gone\nWHERE k = ? /* :also */", []string{"key"}},
		{`SELECT ':unterminated`, `SELECT ':unterminated`, nil},
		{`SELECT :1x`, `SELECT :1x`, nil},
		{`SELECT @now, $key`, `SELECT ?, ?`, []string{"now", "key"}},
	} {
		out, names := positional(c.in)
		if out != c.out || !slices.Equal(names, c.names) {
			t.Errorf("positional(%q) = %q, %q; want %q, %q", c.in, out, names, c.out, c.names)
		}
	}
	if _, err := replayParams([]string{"tenant", "token"}); err == nil {
		t.Error("a parameter Begin's read does not bind was accepted")
	}
}
