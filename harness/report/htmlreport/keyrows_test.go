package htmlreport

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// retriedOrder records what a scheduled scenario's rounds leave for one
// order: each of keys keys claimed, worked, charged (the provider keyed by
// the order: one effective charge) and saved, and the first key also
// claimed again claims times after its claim went stale, each of those a
// takeover whose work and save are recorded too.
func retriedOrder(keys, claims int) (*history.History, *history.Ledger) {
	h, l := history.New(), history.NewLedger()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at, id := int64(0), 0
	const order = "o000"
	round := func(client int, k stores.KeyRef, takeover bool) {
		id++
		tok := stores.Token(fmt.Sprintf("tok-%d", id))
		h.AddOp(history.Op{Client: client, Call: at, Return: at + 10, Input: models.Input{Kind: models.Begin, Key: k, Fingerprint: "fp", Now: t0.Add(time.Duration(at)), ID: id},
			Output: models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: tok, Takeover: takeover, DecidedAt: t0.Add(time.Duration(at))}}})
		w := h.AddWork(history.WorkRun{Client: client, Key: k, Order: order, Token: tok, Start: at + 10})
		h.EndWorkAt(w, at+30, false, l.Charge(order, "charge:"+order, client, at+20))
		id++
		res := stores.Response{Status: 201, Body: "charged " + order}
		h.AddOp(history.Op{Client: client, Call: at + 30, Return: at + 40, Input: models.Input{Kind: models.Complete, Key: k, Token: tok, Response: res, Now: t0.Add(time.Duration(at + 30)), ID: id}})
		h.AddAnswer(history.Answer{Client: client, Key: k, Order: order, Fingerprint: "fp", Response: res, Status: res.Status, At: at + 40})
		at += int64(time.Second)
	}
	for i := range keys {
		k := stores.KeyRef{Tenant: "t0", Key: fmt.Sprintf("round-%d", i)}
		round(i%4, k, false)
		for j := 0; i == 0 && j < claims; j++ {
			round(j%4, k, true)
		}
	}
	return h, l
}

// TestKeyTablesKeepTheirFirstRows: a key's tables on the page (its owners,
// saved responses, charges, final answers) show their first
// Limits.KeyRows rows and say how many more there are, in a history where
// one order was retried under many keys and one key claimed again many
// times; the keys table counts them all.
func TestKeyTablesKeepTheirFirstRows(t *testing.T) {
	const keys, claims, rows = 60, 90, 7
	h, l := retriedOrder(keys, claims)
	sr := results.ScenarioResult{Name: "rounds", Verdict: check.Pass, Ops: len(h.Ops()), Keys: keys}
	sr.Attach(h, l)
	sum := &results.Summary{Store: "memory", Variant: "correct", Verdict: check.Pass, Scenarios: []results.ScenarioResult{sr}, Violations: []check.Violation{}}
	lim := DefaultLimits
	lim.OtherKeys, lim.KeyRows = 3, rows
	_, html := writeDir(t, sum, lim)

	for _, want := range []string{
		fmt.Sprintf("The first %d of %d claims; %d more", rows, claims+1, claims+1-rows),
		fmt.Sprintf("The first %d of %d saved responses; %d more", rows, claims+1, claims+1-rows),
		fmt.Sprintf("The first %d of %d final answers; %d more", rows, claims+1, claims+1-rows),
		fmt.Sprintf("The first %d of %d charges; %d more", rows, keys+claims, keys+claims-rows),
		fmt.Sprintf("<td>%d</td><td>%d</td><td>%d</td><td>1 / %d</td>", 2*(claims+1), claims+1, claims+1, keys+claims), // calls, claims, work runs, charges
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
	// The first key's owners table: rows owners, each with its fate.
	first := html[strings.Index(html, `<details class="key`):]
	first = first[:strings.Index(first, "</details>")]
	owners := first[strings.Index(first, "Owners and their tokens"):strings.Index(first, "Saved response")]
	if n := len(regexp.MustCompile(`<ul class="fate">`).FindAllString(owners, -1)); n != rows {
		t.Errorf("the first key's owners table has %d rows, want %d", n, rows)
	}
	if !strings.Contains(owners, "tok-1<") || !strings.Contains(owners, "saved 201") {
		t.Errorf("the first key's owners table does not start with its first claim and what became of it:\n%s", owners)
	}
	// Every other key shows its one claim, and no note: nothing left out.
	if n := strings.Count(html, "<p class=\"omitted\">The first "); n != 4+(lim.OtherKeys-1) {
		t.Errorf("%d notes of rows left out, want 4 for the first key and one (its order's charges) for each other key shown", n)
	}
}
