package mutate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/idemcheck/idemcheck/stores"
)

// Kind names a class of generated mutant: the rewrite that made it.
type Kind string

// The rewrites. DropConjunct to SwapStatus make the classic slips of a
// condition or a write; ShiftBoundary and LikeEquals measure reach: the
// workload going to exact boundaries and sending values that a pattern
// misreads; WeakenSetting, the deployment: the store's own code under
// the settings a team may run it with.
const (
	// DropConjunct removes one conjunct (or disjunct, when the condition
	// is an OR at its top) of a WHERE, a CASE WHEN or a Lua if; a
	// condition of one term becomes TRUE (SQL) or true (Lua).
	DropConjunct Kind = "drop-conjunct"
	// FlipComparison negates one comparison (= and <>, < and >=, > and
	// <=; in Lua == and ~=, and `not x` becomes x).
	FlipComparison Kind = "flip-comparison"
	// DropSet removes one column of an UPDATE's SET (both sides of a row
	// assignment) or one field of a Lua HSET.
	DropSet Kind = "drop-set"
	// DropGuard removes one Lua guard: an `if … then return … end`.
	DropGuard Kind = "drop-guard"
	// SwapStatus writes 'done' for 'in_flight' or the reverse, once.
	SwapStatus Kind = "swap-status"
	// ShiftBoundary moves one ordering comparison across its boundary
	// (< and <=, > and >=): staleness judged past LockTTL instead of at
	// it, a key pruned one tick early or late.
	ShiftBoundary Kind = "shift-boundary"
	// LikeEquals makes one SQL equality between a column and a parameter
	// a LIKE (`token = $3` becomes `token LIKE $3`): a token, key or
	// tenant holding % or _ then matches other rows.
	LikeEquals Kind = "like-equals"
	// WeakenSetting replaces one value of a backend's settings statement
	// (stores.SettingsStatement) with one a deployment may have instead:
	// another isolation level, commits acknowledged before they are on
	// disk, a client library's retries (weakerSettings lists them). Its
	// mutants also run [SettingScenarios], which crash the server and lose
	// replies.
	WeakenSetting Kind = "weaken-setting"
)

// Kinds lists the rewrites in the order reports print them.
var Kinds = []Kind{DropConjunct, FlipComparison, DropSet, DropGuard, SwapStatus, ShiftBoundary, LikeEquals, WeakenSetting}

// Statement is one statement or script of a store, as the store runs it
// (stores.Config.Statements names it and hands its text).
type Statement struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Mutant is one generated edit of one statement.
type Mutant struct {
	// ID names the mutant stably: statement, rewrite, the fragment edited
	// and, when the same edit fits several places, its occurrence. An
	// equivalence argument (stores.Backend's Equivalent) is keyed by it.
	ID        string `json:"id"`
	Statement string `json:"statement"`
	Kind      Kind   `json:"kind"`
	// From and To are the edited fragment before and after, on one line.
	From string `json:"from"`
	To   string `json:"to"`
	// Orig and Text are the whole statement before and after the edit.
	Orig string `json:"-"`
	Text string `json:"-"`
}

// Edit is the stores.Config.Edit that runs this mutant: the named
// statement's text replaced by the mutant's, every other as written. A
// text that is not the one the mutant was generated from is left alone,
// so a mutant never edits a statement it was not made from. As data, it
// reaches worker processes too.
func (m Mutant) Edit() *stores.Edit {
	return &stores.Edit{Statement: m.Statement, Orig: m.Orig, Text: m.Text}
}

// edit is one splice of a statement's source (two for a row assignment's
// column, whose name and value sit apart: also is the second, later one).
type edit struct {
	kind       Kind
	start, end int
	repl       string
	from, to   string // the fragment as reported (defaults: source and repl)
	also       *edit
}

// apply returns src with the edit's splices made.
func (e edit) apply(src string) string {
	if e.also != nil {
		src = src[:e.also.start] + e.also.repl + src[e.also.end:]
	}
	return src[:e.start] + e.repl + src[e.end:]
}

// Generate makes every mutant of the statements: each rewrite at each
// place it applies, one edit per mutant. Statements are Lua when they call
// redis.call, SQL otherwise. Two edits that give the same text are one
// mutant (the first).
func Generate(stmts []Statement) []Mutant {
	var out []Mutant
	for _, st := range stmts {
		var edits []edit
		switch {
		case isSettings(st.Name):
			edits = settingEdits(st.Text)
		case isLua(st.Text):
			edits = luaEdits(st.Text)
		default:
			edits = sqlEdits(st.Text)
		}
		seen := map[string]bool{st.Text: true}
		ids := map[string]int{}
		for _, e := range edits {
			text := e.apply(st.Text)
			if seen[text] {
				continue
			}
			seen[text] = true
			from, to := e.from, e.to
			if from == "" {
				from = collapse(st.Text[e.start:e.end])
			}
			if to == "" {
				to = collapse(e.repl)
			}
			id := fmt.Sprintf("%s: %s %q", st.Name, e.kind, from)
			if e.kind == FlipComparison || e.kind == SwapStatus || e.kind == ShiftBoundary || e.kind == LikeEquals || e.kind == WeakenSetting {
				id = fmt.Sprintf("%s: %s %q → %q", st.Name, e.kind, from, to)
			}
			ids[id]++
			if n := ids[id]; n > 1 {
				id = fmt.Sprintf("%s #%d", id, n)
			}
			out = append(out, Mutant{ID: id, Statement: st.Name, Kind: e.kind, From: from, To: to, Orig: st.Text, Text: text})
		}
	}
	return out
}

func isLua(src string) bool { return strings.Contains(src, "redis.call(") }

// span is a run of tokens [lo, hi).
type span struct{ lo, hi int }

// splitTop splits the tokens of sp at the top-level (depth d) words sep
// (AND, OR, and, or, or a comma when sep is ","), skipping the AND of a
// SQL BETWEEN.
func splitTop(ts []tok, sp span, d int, sep string) []span {
	var out []span
	lo := sp.lo
	between := false
	for i := sp.lo; i < sp.hi; i++ {
		t := ts[i]
		if t.depth != d {
			continue
		}
		if t.is("BETWEEN") {
			between = true
			continue
		}
		if sep == "," && t.kind == op && t.text == "," || sep != "," && t.kind == word && t.text != "" && strings.EqualFold(t.text, sep) {
			if between && strings.EqualFold(sep, "AND") {
				between = false
				continue
			}
			out = append(out, span{lo, i})
			lo = i + 1
		}
	}
	return append(out, span{lo, sp.hi})
}

// conditionEdits are the edits of one condition (tokens sp at depth d):
// drop each conjunct (each disjunct when its top is an OR), or make a
// one-term condition always true; flip each comparison in it not taken
// yet (a nested condition, handled first, takes its own), and take it.
func conditionEdits(src string, ts []tok, sp span, d int, lua bool, taken []bool) []edit {
	if sp.lo >= sp.hi {
		return nil
	}
	and, or, always := "AND", "OR", "TRUE"
	if lua {
		and, or, always = "and", "or", "true"
	}
	var out []edit
	terms := splitTop(ts, sp, d, and)
	if len(terms) == 1 {
		terms = splitTop(ts, sp, d, or)
	}
	text := func(s span) string { return src[ts[s.lo].start:ts[s.hi-1].end] }
	// A term whose removal would leave a positional parameter ($3) unused
	// is made true in place instead, as (term OR TRUE): Postgres refuses
	// to run a statement given more parameters than it names, and the
	// mutant would be an error on every call, not the dropped check.
	keep := func(t span) edit {
		return edit{kind: DropConjunct, start: ts[t.lo].start, end: ts[t.hi-1].end,
			repl: "(" + text(t) + " OR TRUE)", from: collapse(text(t)), to: "(dropped)"}
	}
	if len(terms) == 1 {
		e := edit{kind: DropConjunct, start: ts[sp.lo].start, end: ts[sp.hi-1].end, repl: always}
		if !lua && losesParam(src, e) {
			e = keep(sp)
		}
		out = append(out, e)
	} else {
		for i, t := range terms {
			if t.lo >= t.hi {
				continue
			}
			var e edit
			if i == 0 {
				e = edit{start: ts[t.lo].start, end: ts[terms[1].lo].start}
			} else {
				prev := terms[i-1]
				e = edit{start: ts[prev.hi-1].end, end: ts[t.hi-1].end}
			}
			e.kind, e.from, e.to = DropConjunct, collapse(text(t)), "(dropped)"
			if !lua && losesParam(src, e) {
				e = keep(t)
			}
			out = append(out, e)
		}
	}
	// Flip each comparison, named by the term (conjunct or disjunct) it
	// sits in.
	for _, t := range terms {
		if t.lo >= t.hi {
			continue
		}
		term := collapse(text(t))
		for i := t.lo; i < t.hi; i++ {
			x := ts[i]
			if lua && x.kind == word && x.text == "not" && i+1 < t.hi { // not x: x compared with nil and false
				flipped := collapse(src[ts[t.lo].start:x.start] + src[ts[i+1].start:ts[t.hi-1].end])
				out = append(out, edit{kind: FlipComparison, start: x.start, end: ts[i+1].start, from: term, to: flipped})
				continue
			}
			neg, ok := flips[x.text]
			if taken[i] {
				continue
			}
			taken[i] = true
			if x.kind != op || !ok || lua && (x.text == "=" || x.text == "<>" || x.text == "!=") || !lua && (x.text == "==" || x.text == "~=") {
				continue // not a comparison of this language (Lua's = assigns)
			}
			flipped := collapse(src[ts[t.lo].start:x.start] + neg + src[x.end:ts[t.hi-1].end])
			out = append(out, edit{kind: FlipComparison, start: x.start, end: x.end, repl: neg, from: term, to: flipped})
		}
	}
	return out
}

// losesParam reports whether the edit removes the last use of a
// positional parameter ($n) from the statement.
func losesParam(src string, e edit) bool {
	after := map[string]bool{}
	for _, t := range lex(e.apply(src)) {
		if t.kind == word && strings.HasPrefix(t.text, "$") {
			after[t.text] = true
		}
	}
	for _, t := range lex(src) {
		if t.kind == word && strings.HasPrefix(t.text, "$") && !after[t.text] {
			return true
		}
	}
	return false
}

// statusEdits swap each status literal, 'in_flight' for 'done' and back,
// except in Lua table constructors (a script's reply codes, not statuses).
func statusEdits(ts []tok, lua bool) []edit {
	var out []edit
	braces := 0
	for _, t := range ts {
		if lua && t.kind == op {
			switch t.text {
			case "{":
				braces++
			case "}":
				braces--
			}
		}
		if t.kind != str || lua && braces > 0 {
			continue
		}
		q := t.text[:1]
		switch t.text[1 : len(t.text)-1] {
		case "in_flight":
			out = append(out, edit{kind: SwapStatus, start: t.start, end: t.end, repl: q + "done" + q})
		case "done":
			out = append(out, edit{kind: SwapStatus, start: t.start, end: t.end, repl: q + "in_flight" + q})
		}
	}
	return out
}

// sortEdits orders edits by kind (Kinds' order), then by place.
func sortEdits(es []edit) {
	rank := map[Kind]int{}
	for i, k := range Kinds {
		rank[k] = i
	}
	sort.SliceStable(es, func(i, j int) bool {
		if rank[es[i].kind] != rank[es[j].kind] {
			return rank[es[i].kind] < rank[es[j].kind]
		}
		return es[i].start < es[j].start
	})
}
