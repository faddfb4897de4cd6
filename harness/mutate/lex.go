package mutate

import (
	"strings"
	"unicode"
)

// tok is one token of a statement or script: its text and where it sits
// in the source (an edit is a splice of the source at these offsets, so
// the rest of the text, comments and layout included, stays as written).
type tok struct {
	text       string
	start, end int
	kind       tokKind
	depth      int // parentheses (and, in Lua, braces) open around it
}

type tokKind int

const (
	word tokKind = iota // identifier, keyword, number, parameter (:name, $1)
	str                 // a quoted string literal
	op                  // an operator or punctuation
)

// lex splits src into tokens, dropping whitespace and comments (-- to the
// end of the line, in SQL and Lua alike). Strings are single- or
// double-quoted, with a doubled quote or a backslash escape inside.
func lex(src string) []tok {
	var out []tok
	depth := 0
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(src) {
				if src[j] == '\\' {
					j += 2
					continue
				}
				if src[j] == c {
					if j+1 < len(src) && src[j+1] == c { // '' inside a SQL string
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j >= len(src) {
				j = len(src) - 1
			}
			out = append(out, tok{text: src[i : j+1], start: i, end: j + 1, kind: str, depth: depth})
			i = j + 1
			continue
		case isWord(rune(c)) || c == ':' && i+1 < len(src) && isWord(rune(src[i+1])) || c == '$':
			j := i + 1
			for j < len(src) && (isWord(rune(src[j])) || src[j] == '.') {
				j++
			}
			out = append(out, tok{text: src[i:j], start: i, end: j, kind: word, depth: depth})
			i = j
			continue
		}
		n := 1
		if i+1 < len(src) {
			switch src[i : i+2] {
			case "<=", ">=", "<>", "!=", "==", "~=", "::", "||", "..":
				n = 2
			}
		}
		t := tok{text: src[i : i+n], start: i, end: i + n, kind: op, depth: depth}
		switch t.text {
		case "(", "{", "[":
			depth++
		case ")", "}", "]":
			depth--
			t.depth = depth
		}
		out = append(out, t)
		i += n
	}
	return out
}

func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// is reports whether the token is the keyword kw (SQL keywords in any case).
func (t tok) is(kw string) bool { return t.kind == word && strings.EqualFold(t.text, kw) }

// flips maps each comparison operator to its negation (SQL's and Lua's;
// conditionEdits keeps each language to its own).
var flips = map[string]string{
	"=": "<>", "<>": "=", "!=": "=", "==": "~=", "~=": "==",
	"<": ">=", ">=": "<", ">": "<=", "<=": ">",
}

// collapse prints a fragment on one line, whitespace collapsed.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
