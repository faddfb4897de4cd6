package mutate

import "strings"

// The rewriters of reach: edits a careful reviewer still makes, whose
// effect shows only where the workload goes to an exact boundary or sends
// a value that means something to a pattern.

// boundaries maps each ordering comparison to the same comparison shifted
// across its boundary: the off-by-one at exactly LockTTL or exactly the
// retention.
var boundaries = map[string]string{"<": "<=", "<=": "<", ">": ">=", ">=": ">"}

// boundaryEdits shift each ordering comparison (SQL and Lua alike) across
// its boundary: < and <=, > and >= swapped. An assignment's operator is
// never one of them.
func boundaryEdits(src string, ts []tok, lua bool) []edit {
	var out []edit
	for i, t := range ts {
		to, ok := boundaries[t.text]
		if t.kind != op || !ok {
			continue
		}
		lo, hi := comparisonAround(ts, i, lua)
		from := collapse(src[ts[lo].start:ts[hi-1].end])
		shifted := collapse(src[ts[lo].start:t.start] + to + src[t.end:ts[hi-1].end])
		out = append(out, edit{kind: ShiftBoundary, start: t.start, end: t.end, repl: to, from: from, to: shifted})
	}
	return out
}

// likeEdits make each SQL equality between a column and a parameter
// (`token = $3`, `key = :key`) a LIKE: a pattern match, under which a
// parameter holding % or _ matches other values (and SQLite's LIKE also
// folds ASCII case). assign marks the = of SET lists, which assign. A
// parameter cast (`$4::interval`) is left alone: LIKE would not type.
func likeEdits(src string, ts []tok, assign []bool) []edit {
	var out []edit
	isParam := func(j int) bool {
		return j >= 0 && j < len(ts) && ts[j].kind == word && (strings.HasPrefix(ts[j].text, "$") || strings.HasPrefix(ts[j].text, ":")) &&
			(j+1 >= len(ts) || ts[j+1].text != "::")
	}
	isColumn := func(j int) bool {
		if j < 0 || j >= len(ts) || ts[j].kind != word || strings.HasPrefix(ts[j].text, "$") || strings.HasPrefix(ts[j].text, ":") {
			return false
		}
		c := ts[j].text[0]
		return c < '0' || c > '9'
	}
	for i, t := range ts {
		if t.kind != op || t.text != "=" || assign[i] {
			continue
		}
		if !(isColumn(i-1) && isParam(i+1) || isParam(i-1) && isColumn(i+1)) {
			continue
		}
		from := collapse(src[ts[i-1].start:ts[i+1].end])
		to := collapse(src[ts[i-1].start:t.start] + " LIKE " + src[t.end:ts[i+1].end])
		out = append(out, edit{kind: LikeEquals, start: t.start, end: t.end, repl: " LIKE ", from: from, to: to})
	}
	return out
}

// comparisonAround is the comparison holding the operator at ts[i]: back
// and forward at its depth to the nearest word or punctuation that starts
// or ends a condition's term.
func comparisonAround(ts []tok, i int, lua bool) (int, int) {
	d := ts[i].depth
	stop := func(t tok) bool {
		if t.depth < d {
			return true
		}
		if t.depth > d {
			return false
		}
		if t.kind == op {
			return t.text == "," || t.text == ";" || lua && t.text == "="
		}
		if t.kind != word {
			return false
		}
		for _, kw := range termEnds {
			if lua && t.text == strings.ToLower(kw) || !lua && t.is(kw) {
				return true
			}
		}
		return false
	}
	lo := i
	for lo > 0 && !stop(ts[lo-1]) {
		lo--
	}
	hi := i + 1
	for hi < len(ts) && !stop(ts[hi]) {
		hi++
	}
	return lo, hi
}

// termEnds are the keywords (SQL in any case, Lua in lower case) that
// begin or end a comparison's term.
var termEnds = []string{"AND", "OR", "NOT", "WHERE", "WHEN", "THEN", "ELSE", "ELSEIF", "END", "SELECT", "ON", "AS",
	"FROM", "RETURNING", "LIMIT", "CASE", "IF", "RETURN", "LOCAL", "CHECK", "BETWEEN"}
