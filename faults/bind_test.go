package faults

import (
	"database/sql"
	"testing"
	"time"
)

// TestBind: named and positional placeholders get their values as SQL
// literals, whole tokens only, and a value is never bound again.
func TestBind(t *testing.T) {
	for _, c := range []struct {
		stmt string
		args []any
		want string
	}{
		{"UPDATE k SET v = :v WHERE t = :token AND n >= :now - :now_ms",
			[]any{sql.Named("now", int64(5)), sql.Named("now_ms", int64(7)), sql.Named("token", "a'b"), sql.Named("v", []byte{0, 1})},
			"UPDATE k SET v = x'0001' WHERE t = 'a''b' AND n >= 5 - 7"},
		{"SELECT $1, $2, $10, $1x", []any{[]byte("t"), 250 * time.Millisecond, 3, 4, 5, 6, 7, 8, 9, nil},
			"SELECT 't', '250ms', NULL, $1x"},
		{"SELECT :a", []any{sql.Named("a", ":a")}, "SELECT ':a'"},
		{"SELECT $1, $2", []any{(*time.Time)(nil), &[]int{7}[0]}, "SELECT NULL, 7"},
	} {
		if got := Bind(c.stmt, c.args...); got != c.want {
			t.Errorf("Bind(%q) = %q, want %q", c.stmt, got, c.want)
		}
	}
}
