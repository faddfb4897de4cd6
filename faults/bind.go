package faults

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// TraceBound is Trace with the statement's arguments written into its
// text (see Bind), so a reader sees the values each statement ran with;
// the binding is done only when someone listens.
func TraceBound(ctx context.Context, stmt string, args []any, result string) {
	if t := tracerOf(ctx); t != nil {
		t.Trace(ctx, Bind(stmt, args...), result)
	}
}

// TraceBoundf is TraceBound with the result formatted.
func TraceBoundf(ctx context.Context, stmt string, args []any, format string, a ...any) {
	if t := tracerOf(ctx); t != nil {
		t.Trace(ctx, Bind(stmt, args...), fmt.Sprintf(format, a...))
	}
}

// Bind writes a statement's arguments into its text as SQL literals: each
// :name placeholder gets its sql.NamedArg's value (SQLite's style), and $1,
// $2, … the positional arguments (Postgres's). It is for reading only: the
// store still sends the statement and its arguments apart. Long values (a
// response body) are cut, and bytes that are not text print as x'…'.
func Bind(stmt string, args ...any) string {
	named := map[string]string{}
	var names []string
	var positional []string
	for _, a := range args {
		if n, ok := a.(sql.NamedArg); ok {
			named[n.Name] = literal(n.Value)
			names = append(names, n.Name)
			continue
		}
		positional = append(positional, literal(a))
	}
	// Longest names first, so :now does not eat the start of :now_ms; the
	// highest positions first, so $1 does not eat the start of $10.
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	var pairs []string
	for _, n := range names {
		pairs = append(pairs, ":"+n, named[n])
	}
	for i := len(positional); i >= 1; i-- {
		pairs = append(pairs, "$"+strconv.Itoa(i), positional[i-1])
	}
	return replaceTokens(stmt, pairs)
}

// replaceTokens replaces each placeholder of pairs (placeholder, value)
// where it stands as a whole token (not followed by a letter, digit or _),
// scanning the statement once so that values are never replaced again.
func replaceTokens(s string, pairs []string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		matched := false
		for p := 0; p+1 < len(pairs); p += 2 {
			ph := pairs[p]
			if strings.HasPrefix(s[i:], ph) {
				end := i + len(ph)
				if end < len(s) && isWordByte(s[end]) {
					continue
				}
				b.WriteString(pairs[p+1])
				i, matched = end, true
				break
			}
		}
		if !matched {
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// maxLiteral is how many characters of a value a bound statement shows.
const maxLiteral = 40

// literal prints a value as SQL would read it: a nil pointer is NULL,
// another pointer its value.
func literal(v any) string {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "NULL"
		}
		return literal(rv.Elem().Interface())
	}
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return quote(x)
	case []byte:
		if utf8.Valid(x) && !strings.ContainsAny(string(x), "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b\x0c\x0e\x0f\x7f") {
			return quote(string(x))
		}
		h := fmt.Sprintf("%x", x)
		if len(h) > maxLiteral {
			h = h[:maxLiteral] + "…"
		}
		return "x'" + h + "'"
	case bool:
		return strconv.FormatBool(x)
	case time.Duration:
		return "'" + x.String() + "'"
	case time.Time:
		return "'" + x.UTC().Format("15:04:05.000") + "'"
	case fmt.Stringer:
		return quote(x.String())
	}
	return fmt.Sprint(v)
}

func quote(s string) string {
	if r := []rune(s); len(r) > maxLiteral {
		s = string(r[:maxLiteral]) + "…"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
