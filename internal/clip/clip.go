// Package clip cuts text meant for a person to a length, at a rune: a
// store's stderr line, a store error in a summary.
package clip

import "unicode/utf8"

// Bytes cuts s to at most n bytes, at a rune boundary, marking the cut
// with "…"; s shorter than that is returned as it is.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
