package htmlreport

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// keyView is everything the report shows about one key.
type keyView struct {
	Key        string
	Anchor     string
	Order      string
	Violated   bool
	Checkers   []string // the checkers it violated, in order
	Violations []check.Violation
	Calls      int
	// Claims counts the key's claims; Owners tells the first of them
	// (Limits.KeyRows), MoreOwners how many more there were. Saved,
	// Charges and Answers are cut the same way, each with its own More
	// count: a key retried for a long run holds thousands of each, and
	// telling them all cost a page more memory than the machine had.
	Claims      int
	Owners      []owner
	MoreOwners  int
	Saved       []saved
	MoreSaved   int
	Charges     []history.Charge // the order's charges (shared by its keys: read only)
	ChargeCalls int              // how many there are, before the cut
	MoreCharges int
	Effective   int
	Answers     []history.Answer
	MoreAnswers int
	WorkRuns    int
	// AnswerSummary groups the clients' final answers ("5 × 200 "ch_1"").
	AnswerSummary string
}

// owner is one claim on the key: who holds it, with which token, and what
// became of it.
type owner struct {
	Client   int
	Token    string
	At       string
	Takeover bool
	Unknown  bool // a Begin with no answer, which may have claimed
	Fate     []string
}

// saved is one accepted Complete: a response the key saved.
type saved struct {
	Client int
	Token  string
	Status int
	Body   string
	At     string
}

// keyViews builds the views of a scenario's keys, from h, what the page
// draws of its history, with the violations that name them, violated keys
// first. A violation that names an order rather
// than a key (at-most-once counts charges per order) goes to the order's
// keys; one that names neither is returned apart, as scenario-wide. A
// view's owners, saved responses and answer summary are filled by detail,
// called on the views the page shows: a run of many keys shows a few,
// and telling every key's owners was most of its page's cost. detail
// keeps the first rows of each of a key's tables (0: all of them).
func keyViews(s *results.ScenarioResult, h *history.History, anchorPrefix string, rows int) (views []*keyView, wide []check.Violation, detail func(*keyView)) {
	if h == nil {
		return nil, s.Violations, func(*keyView) {}
	}
	ops := h.Ops()
	work := h.Work()
	faults := h.Faults()
	answers := h.Answers()
	var charges []history.Charge
	if l := s.Ledger(); l != nil {
		charges = l.Charges()
	}

	byKey := map[string]*keyView{}
	byRef := map[stores.KeyRef]*keyView{} // a key named once, not once per call
	get := func(k stores.KeyRef) *keyView {
		if v, ok := byRef[k]; ok {
			return v
		}
		name := keyName(k)
		v, ok := byKey[name]
		if !ok {
			v = &keyView{Key: name, Anchor: anchorPrefix + "-k" + strconv.Itoa(len(views))}
			byKey[name] = v
			views = append(views, v)
		}
		byRef[k] = v
		return v
	}
	keyOps := map[string][]history.Op{}
	for _, op := range ops {
		if op.Input.Kind == models.Prune {
			continue
		}
		v := get(op.Input.Key)
		v.Calls++
		keyOps[v.Key] = append(keyOps[v.Key], op)
	}
	orderKeys := map[string][]*keyView{}
	setOrder := func(v *keyView, order string) {
		if order == "" || v.Order == order {
			return
		}
		if v.Order == "" {
			v.Order = order
		}
		for _, o := range orderKeys[order] {
			if o == v {
				return
			}
		}
		orderKeys[order] = append(orderKeys[order], v)
	}
	for _, w := range work {
		v := get(w.Key)
		v.WorkRuns++
		setOrder(v, w.Order)
	}
	for _, a := range answers {
		v := get(a.Key)
		v.Answers = append(v.Answers, a)
		setOrder(v, a.Order)
	}
	// Each key looks its order's charges up, and shares them: an order
	// retried under many keys (a scheduled scenario's rounds) has as many
	// charges as keys, and a copy per key grew as their product (22 GB).
	type orderCharges struct {
		list      []history.Charge
		effective int
	}
	byOrder := map[string]*orderCharges{}
	for _, c := range charges {
		oc := byOrder[c.Order]
		if oc == nil {
			oc = &orderCharges{}
			byOrder[c.Order] = oc
		}
		oc.list = append(oc.list, c)
		if c.Effective {
			oc.effective++
		}
	}
	for _, v := range views {
		if oc := byOrder[v.Order]; v.Order != "" && oc != nil {
			v.Charges, v.ChargeCalls, v.Effective = oc.list, len(oc.list), oc.effective
		}
	}

	for _, viol := range s.Violations {
		targets := []*keyView{}
		if v, ok := byKey[viol.Key]; ok {
			targets = append(targets, v)
		} else {
			targets = orderKeys[viol.Key]
		}
		if len(targets) == 0 {
			wide = append(wide, viol)
			continue
		}
		for _, v := range targets {
			v.Violated = true
			v.Violations = append(v.Violations, viol)
			if !slices.Contains(v.Checkers, viol.Checker) {
				v.Checkers = append(v.Checkers, viol.Checker)
			}
		}
	}

	// Each key's owners are told from its own work and faults: indexed by
	// key, so that a run of many keys costs its calls, not keys × work
	// (the stress scenario's page took 12 of 22 CPU-seconds in fate).
	keyWork := map[string][]history.WorkRun{}
	for _, w := range work {
		name := get(w.Key).Key
		keyWork[name] = append(keyWork[name], w)
	}
	keyFaults := map[string][]history.Fault{}
	for _, f := range faults {
		name := keyName(f.Key)
		keyFaults[name] = append(keyFaults[name], f)
	}
	detail = func(v *keyView) {
		v.Owners, v.Claims, v.Saved, v.MoreSaved = owners(keyOps[v.Key], keyWork[v.Key], keyFaults[v.Key], rows)
		v.MoreOwners = v.Claims - len(v.Owners)
		v.AnswerSummary = summarizeAnswers(v.Answers)
		v.Charges, v.MoreCharges = firstRows(v.Charges, rows)
		v.Answers, v.MoreAnswers = firstRows(v.Answers, rows)
	}
	sort.SliceStable(views, func(i, j int) bool { return views[i].Violated && !views[j].Violated })
	return views, wide, detail
}

// owners tells the first rows claims on one key (0: all) and what became
// of each, and the first rows responses it saved, from the key's calls,
// work runs and faults; it counts the claims, and the saved responses
// left out. Telling a claim's fate reads the key's calls, so only the
// claims shown are told: told for every claim of a key retried
// thousands of times, it took minutes.
func owners(ops []history.Op, work []history.WorkRun, faults []history.Fault, rows int) (out []owner, claims int, sv []saved, moreSaved int) {
	for _, op := range ops {
		if op.Input.Kind != models.Begin {
			continue
		}
		unknown, claimed := op.Output.Unknown, op.Output.Decision.Outcome == stores.Claimed
		if !unknown && !claimed {
			continue
		}
		claims++
		if rows > 0 && len(out) >= rows {
			continue
		}
		if unknown {
			out = append(out, owner{Client: op.Client, Token: fmt.Sprintf("?%d (never seen)", op.Input.ID), At: ms(op.Call), Unknown: true,
				Fate: []string{"Begin got no answer: it may have claimed the key with a token nobody saw"}})
			continue
		}
		d := op.Output.Decision
		o := owner{Client: op.Client, Token: string(d.Token), At: ms(op.Return), Takeover: d.Takeover}
		o.Fate = fate(op, d.Token, ops, work, faults)
		out = append(out, o)
	}
	for _, op := range ops {
		if !op.Accepted(models.Complete) {
			continue
		}
		if rows > 0 && len(sv) >= rows {
			moreSaved++
			continue
		}
		sv = append(sv, saved{Client: op.Client, Token: string(op.Input.Token), Status: op.Input.Response.Status,
			Body: op.Input.Response.Body, At: ms(op.Return)})
	}
	return out, claims, sv, moreSaved
}

// firstRows is the first rows of list (0: all of it) and how many it
// leaves out.
func firstRows[T any](list []T, rows int) ([]T, int) {
	if rows <= 0 || len(list) <= rows {
		return list, 0
	}
	return list[:rows:rows], len(list) - rows
}

// fate says what the owner did with its claim: work, faults, its save or
// release, in time order.
func fate(claim history.Op, tok stores.Token, ops []history.Op, work []history.WorkRun, faults []history.Fault) []string {
	type ev struct {
		at   int64
		text string
	}
	var evs []ev
	key := claim.Input.Key
	// A token handed out twice (a bug the fencing checker names) must not
	// credit one owner with the other's deeds: stop at the next claim with it.
	until := history.Never
	for _, op := range ops {
		if op.Call > claim.Call && op.Input.Kind == models.Begin && !op.Output.Unknown &&
			op.Output.Decision.Outcome == stores.Claimed && op.Output.Decision.Token == tok {
			until = op.Call
			break
		}
	}
	// Faults carry no token: credit one to the claim of the client's
	// attempt it happened in, which ends at the client's next Begin.
	faultsUntil := until
	for _, op := range ops {
		if op.Call > claim.Call && op.Client == claim.Client && op.Input.Kind == models.Begin && op.Call < faultsUntil {
			faultsUntil = op.Call
			break
		}
	}
	for _, w := range work {
		if w.Key != key || w.Token != tok || w.Start < claim.Call || w.Start >= until {
			continue
		}
		switch {
		case w.End == history.Never:
			evs = append(evs, ev{w.Start, fmt.Sprintf("work from %s, never finished", ms(w.Start))})
		case w.Failed:
			evs = append(evs, ev{w.Start, fmt.Sprintf("work %s–%s failed%s", ms(w.Start), ms(w.End), chargeNote(w.ChargeID))})
		default:
			evs = append(evs, ev{w.Start, fmt.Sprintf("work %s–%s%s", ms(w.Start), ms(w.End), chargeNote(w.ChargeID))})
		}
	}
	for _, f := range faults {
		if f.Client != claim.Client || f.Key != key || f.Start < claim.Call || f.Start >= faultsUntil {
			continue
		}
		if f.End > f.Start {
			evs = append(evs, ev{f.Start, fmt.Sprintf("%s at %s for %s", f.Kind, f.Failpoint, dur(f.End-f.Start))})
		} else {
			evs = append(evs, ev{f.Start, fmt.Sprintf("%s at %s (%s)", f.Kind, f.Failpoint, ms(f.Start))})
		}
	}
	for _, op := range ops {
		if op.Input.Token != tok || (op.Input.Kind != models.Complete && op.Input.Kind != models.Release) || op.Call < claim.Call || op.Call >= until {
			continue
		}
		verb := map[models.Kind]string{models.Complete: "save", models.Release: "release"}[op.Input.Kind]
		switch {
		case op.Output.Unknown:
			evs = append(evs, ev{op.Call, fmt.Sprintf("%s at %s: no answer (%s)", verb, ms(op.Call), op.Err)})
		case op.Output.NotApplied:
			evs = append(evs, ev{op.Call, fmt.Sprintf("%s at %s: not applied (%s)", verb, ms(op.Return), op.Err)})
		case op.Output.Fenced:
			text := fmt.Sprintf("%s FENCED at %s", verb, ms(op.Return))
			if op.Err != "" {
				text += " (" + op.Err + ")"
			}
			evs = append(evs, ev{op.Call, text})
		case op.Input.Kind == models.Complete:
			evs = append(evs, ev{op.Call, fmt.Sprintf("saved %d %q at %s", op.Input.Response.Status, op.Input.Response.Body, ms(op.Return))})
		default:
			evs = append(evs, ev{op.Call, fmt.Sprintf("released at %s", ms(op.Return))})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.text
	}
	if len(out) == 0 {
		out = []string{"nothing recorded after the claim"}
	}
	return out
}

func chargeNote(id string) string {
	if id == "" {
		return ""
	}
	return ", charge " + id
}

// summarizeAnswers groups the final answers: `3 × 200 "ch_1", 1 × 409`.
func summarizeAnswers(as []history.Answer) string {
	count := map[string]int{}
	var order []string
	for _, a := range as {
		s := fmt.Sprintf("%d %q", a.Status, a.Response.Body)
		if a.Err != "" {
			s = fmt.Sprintf("%d (%s)", a.Status, a.Err)
		}
		if count[s] == 0 {
			order = append(order, s)
		}
		count[s]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%d × %s", count[s], s)
	}
	return strings.Join(parts, ", ")
}
