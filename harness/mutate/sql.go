package mutate

import "sort"

// sqlEdits are the edits of one SQL statement: the conditions of its
// WHEREs and searched CASE WHENs, every other comparison (a SELECT list's
// judgements), the columns of its SETs, and its status literals.
func sqlEdits(src string) []edit {
	ts := lex(src)
	var out []edit
	inCond := make([]bool, len(ts))
	assign := make([]bool, len(ts))
	// The SET lists first: their = are assignments, not comparisons.
	for i, t := range ts {
		if !t.is("SET") {
			continue
		}
		end := clauseEnd(ts, i, "WHERE", "FROM", "RETURNING")
		items := splitTop(ts, span{i + 1, end}, t.depth, ",")
		for _, it := range items {
			for j := it.lo; j < it.hi; j++ {
				if ts[j].depth == t.depth && ts[j].text == "=" && ts[j].kind == op {
					assign[j] = true
					break
				}
			}
		}
		out = append(out, setEdits(src, ts, items, t.depth)...)
	}
	// The conditions: each WHERE, and each WHEN of a searched CASE (a
	// simple CASE's WHEN holds a value), the most nested first so that a
	// comparison is named by the innermost condition holding it.
	type cond struct{ at, end int }
	var conds []cond
	var cases []bool // the CASEs open: searched (CASE WHEN) or simple (CASE x WHEN)
	for i, t := range ts {
		switch {
		case t.is("CASE"):
			cases = append(cases, i+1 < len(ts) && ts[i+1].is("WHEN"))
		case t.is("END") && len(cases) > 0:
			cases = cases[:len(cases)-1]
		case t.is("WHERE"):
			conds = append(conds, cond{i, clauseEnd(ts, i, "RETURNING", "LIMIT", "ORDER", "GROUP")})
		case t.is("WHEN") && len(cases) > 0 && cases[len(cases)-1]:
			conds = append(conds, cond{i, clauseEnd(ts, i, "THEN")})
		}
	}
	sort.SliceStable(conds, func(i, j int) bool { return ts[conds[i].at].depth > ts[conds[j].at].depth })
	taken := make([]bool, len(ts))
	for _, c := range conds {
		mark(inCond, c.at+1, c.end)
		out = append(out, conditionEdits(src, ts, span{c.at + 1, c.end}, ts[c.at].depth, false, taken)...)
	}
	// Comparisons outside any condition: a SELECT list's judgements
	// (same_fp, stale), each named by its list item.
	for i, t := range ts {
		neg, ok := flips[t.text]
		if t.kind != op || !ok || inCond[i] || assign[i] || t.text == "==" || t.text == "~=" {
			continue
		}
		lo, hi := itemAround(ts, i)
		term := collapse(src[ts[lo].start:ts[hi-1].end])
		flipped := collapse(src[ts[lo].start:t.start] + neg + src[t.end:ts[hi-1].end])
		out = append(out, edit{kind: FlipComparison, start: t.start, end: t.end, repl: neg, from: term, to: flipped})
	}
	out = append(out, statusEdits(ts, false)...)
	out = append(out, boundaryEdits(src, ts, false)...)
	out = append(out, likeEdits(src, ts, assign)...)
	sortEdits(out)
	return out
}

func mark(b []bool, lo, hi int) {
	for i := lo; i < hi; i++ {
		b[i] = true
	}
}

// clauseEnd is where the clause opened by ts[i] ends: the first token at
// its depth that is one of the keywords or ';', the closing of its
// parenthesis, or the end.
func clauseEnd(ts []tok, i int, kws ...string) int {
	d := ts[i].depth
	for j := i + 1; j < len(ts); j++ {
		if ts[j].depth < d || ts[j].depth == d && ts[j].text == ";" {
			return j
		}
		if ts[j].depth == d {
			for _, kw := range kws {
				if ts[j].is(kw) {
					return j
				}
			}
		}
	}
	return len(ts)
}

// itemAround is the list item holding token i: back to a comma, SELECT or
// opening at its depth, forward to a comma, AS, FROM or closing.
func itemAround(ts []tok, i int) (int, int) {
	d := ts[i].depth
	lo := i
	for lo > 0 {
		p := ts[lo-1]
		if p.depth < d || p.depth == d && (p.text == "," || p.is("SELECT") || p.is("WHEN") || p.is("THEN") || p.is("ELSE")) {
			break
		}
		lo--
	}
	hi := i + 1
	for hi < len(ts) {
		n := ts[hi]
		if n.depth < d || n.depth == d && (n.text == "," || n.is("AS") || n.is("FROM") || n.is("THEN") || n.is("END") || n.is("ELSE")) {
			break
		}
		hi++
	}
	return lo, hi
}

// setEdits drop each column of a SET list of two or more (items, at depth
// d): `col = expr` goes with its comma; a row assignment
// `(a, b) = (SELECT x, y FROM …)` loses one name and its value.
func setEdits(src string, ts []tok, items []span, d int) []edit {
	var out []edit
	if len(items) >= 2 {
		for i, it := range items {
			var e edit
			if i == 0 {
				e = edit{start: ts[it.lo].start, end: ts[items[1].lo].start}
			} else {
				e = edit{start: ts[items[i-1].hi-1].end, end: ts[it.hi-1].end}
			}
			e.kind, e.from, e.to = DropSet, collapse(src[ts[it.lo].start:ts[it.hi-1].end]), "(dropped)"
			if losesParam(src, e) {
				// Keep the parameter named (see conditionEdits) and the
				// column as it was: col = CASE WHEN FALSE THEN expr ELSE col END.
				eq := -1
				for j := it.lo; j < it.hi; j++ {
					if ts[j].depth == d && ts[j].text == "=" {
						eq = j
						break
					}
				}
				if eq <= it.lo || eq+1 >= it.hi {
					continue
				}
				col := src[ts[it.lo].start:ts[eq-1].end]
				expr := src[ts[eq+1].start:ts[it.hi-1].end]
				e = edit{kind: DropSet, start: ts[eq+1].start, end: ts[it.hi-1].end,
					repl: "CASE WHEN FALSE THEN " + expr + " ELSE " + col + " END", from: e.from, to: "(dropped)"}
			}
			out = append(out, e)
		}
	}
	for _, it := range items {
		if ts[it.lo].text != "(" {
			continue
		}
		closeCols := -1
		for j := it.lo + 1; j < it.hi; j++ {
			if ts[j].depth == d && ts[j].text == ")" {
				closeCols = j
				break
			}
		}
		// (cols) = ( SELECT values FROM … )
		if closeCols < 0 || closeCols+3 >= it.hi || ts[closeCols+1].text != "=" || ts[closeCols+2].text != "(" || !ts[closeCols+3].is("SELECT") {
			continue
		}
		cols := splitTop(ts, span{it.lo + 1, closeCols}, d+1, ",")
		vend := clauseEnd(ts, closeCols+3, "FROM")
		vals := splitTop(ts, span{closeCols + 4, vend}, d+1, ",")
		if len(cols) != len(vals) || len(cols) < 2 {
			continue
		}
		drop := func(parts []span, i int) *edit {
			if i == 0 {
				return &edit{start: ts[parts[0].lo].start, end: ts[parts[1].lo].start}
			}
			return &edit{start: ts[parts[i-1].hi-1].end, end: ts[parts[i].hi-1].end}
		}
		for i := range cols {
			c, v := drop(cols, i), drop(vals, i)
			e := *c
			e.also = v
			e.kind = DropSet
			e.from = collapse(src[ts[cols[i].lo].start:ts[cols[i].hi-1].end]) + " = " + collapse(src[ts[vals[i].lo].start:ts[vals[i].hi-1].end])
			e.to = "(dropped)"
			out = append(out, e)
		}
	}
	return out
}
