package mutate

// luaEdits are the edits of one Lua script: the conditions of its ifs,
// its guards (an if whose body returns), the fields of its HSETs, and its
// status literals.
func luaEdits(src string) []edit {
	ts := lex(src)
	taken := make([]bool, len(ts))
	var out []edit
	for i, t := range ts {
		if t.kind != word {
			continue
		}
		switch t.text {
		case "if", "elseif":
			then := -1
			for j := i + 1; j < len(ts); j++ {
				if ts[j].kind == word && ts[j].text == "then" {
					then = j
					break
				}
			}
			if then < 0 {
				continue
			}
			out = append(out, conditionEdits(src, ts, span{i + 1, then}, t.depth, true, taken)...)
			if t.text == "if" && then+1 < len(ts) && ts[then+1].text == "return" {
				if end := blockEnd(ts, i); end > 0 {
					out = append(out, edit{kind: DropGuard, start: t.start, end: ts[end].end,
						from: collapse(src[t.start:ts[end].end]), to: "(dropped)"})
				}
			}
		}
	}
	for i, t := range ts {
		if t.kind == str && (t.text == "'HSET'" || t.text == `"HSET"`) && i > 0 && ts[i-1].text == "(" {
			out = append(out, hsetEdits(src, ts, i)...)
		}
	}
	out = append(out, statusEdits(ts, true)...)
	out = append(out, boundaryEdits(src, ts, true)...)
	sortEdits(out)
	return out
}

// blockEnd is the index of the end that closes the block opened at ts[i]
// (if, function, for, while), or -1.
func blockEnd(ts []tok, i int) int {
	open := 0
	for j := i; j < len(ts); j++ {
		if ts[j].kind != word {
			continue
		}
		switch ts[j].text {
		case "if", "function", "for", "while":
			open++
		case "end":
			open--
			if open == 0 {
				return j
			}
		}
	}
	return -1
}

// hsetEdits drop each field (name and value) of the HSET whose command
// name is ts[i], when it sets two or more.
func hsetEdits(src string, ts []tok, i int) []edit {
	d := ts[i].depth
	end := i
	for end < len(ts) && !(ts[end].depth < d) {
		end++
	}
	args := splitTop(ts, span{i, end}, d, ",")
	if len(args) < 6 { // 'HSET', key, then two fields or more
		return nil
	}
	var out []edit
	for f := 2; f+1 < len(args); f += 2 {
		name, val := args[f], args[f+1]
		out = append(out, edit{kind: DropSet, start: ts[args[f-1].hi-1].end, end: ts[val.hi-1].end,
			from: collapse(src[ts[name.lo].start:ts[val.hi-1].end]), to: "(dropped)"})
	}
	return out
}
