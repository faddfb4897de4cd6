package report_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// linHistory records, per key, one client's claim and save and another's
// replay of it; twice, if set, is a key two clients claim at once (no
// order allows it).
func linHistory(keys []string, twice string) (*history.History, *history.Ledger) {
	h := history.New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := int64(time.Millisecond)
	resp := stores.Response{Status: 201, Body: "charged"}
	id := 0
	add := func(client int, in models.Input, out models.Output, call, ret int64) {
		id++
		in.ID = id
		in.Now = t0.Add(time.Duration(call * ms))
		h.AddOp(history.Op{Client: client, Input: in, Output: out, Call: call * ms, Return: ret * ms})
	}
	for i, k := range keys {
		ref := stores.KeyRef{Tenant: "t0", Key: k}
		at := int64(i * 100)
		tok := stores.Token("tok-" + k)
		add(1, models.Input{Kind: models.Begin, Key: ref, Fingerprint: "fp"},
			models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: tok, DecidedAt: t0.Add(time.Duration(at * ms))}}, at, at+1)
		add(1, models.Input{Kind: models.Complete, Key: ref, Token: tok, Response: resp}, models.Output{}, at+5, at+6)
		add(2, models.Input{Kind: models.Begin, Key: ref, Fingerprint: "fp"},
			models.Output{Decision: stores.Decision{Outcome: stores.Replay, Response: resp}}, at+20, at+21)
	}
	if twice != "" {
		ref := stores.KeyRef{Tenant: "t0", Key: twice}
		for c, tok := range []stores.Token{"x1", "x2"} {
			add(3+c, models.Input{Kind: models.Begin, Key: ref, Fingerprint: "fp"},
				models.Output{Decision: stores.Decision{Outcome: stores.Claimed, Token: tok, DecidedAt: t0}}, 0, 10)
		}
	}
	return h, history.NewLedger()
}

// linearizability judges a history as a run does, keeping what a page
// needs, and returns the linearizability checker's result.
func linearizability(t *testing.T, h *history.History, l *history.Ledger) check.Result {
	t.Helper()
	m := models.Config{LockTTL: 100 * time.Millisecond, Retention: time.Hour}
	for _, c := range check.Run(check.Evidence{Hist: h, Ledger: l, Model: m, ProbeClient: 99, LinTimeout: 10 * time.Second, Keep: true}) {
		if c.Checker == check.Linearizable {
			return c
		}
	}
	t.Fatal("no linearizability result")
	return check.Result{}
}

func page(t *testing.T, l *check.Linearization) string {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteLinearization(&b, l); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestLinearizationPageNamesItsKeys: porcupine's page carries a labelled
// row per key, so a reader can tell which partition is which.
func TestLinearizationPageNamesItsKeys(t *testing.T) {
	h, l := linHistory([]string{"order-o000", "order-o001"}, "")
	r := linearizability(t, h, l)
	if r.Verdict != check.Pass || r.Linearization == nil {
		t.Fatalf("%s %s, kept %v", r.Verdict, r.Detail, r.Linearization)
	}
	p := page(t, r.Linearization)
	for _, k := range []string{"key t0/order-o000", "key t0/order-o001"} {
		if !strings.Contains(p, k) {
			t.Errorf("the page (%d bytes) has no row labelled %q", len(p), k)
		}
	}
}

// TestLinearizationPageDrawsTheFailingKeysAlone: a failing check's page
// draws the keys no order allows, not the others.
func TestLinearizationPageDrawsTheFailingKeysAlone(t *testing.T) {
	h, l := linHistory([]string{"order-o000"}, "twice")
	r := linearizability(t, h, l)
	if r.Verdict != check.Fail || r.Linearization == nil {
		t.Fatalf("%s %s, kept %v", r.Verdict, r.Detail, r.Linearization)
	}
	p := page(t, r.Linearization)
	// Operations are drawn without their key: the tokens tell them apart.
	if !strings.Contains(p, "key t0/twice") || !strings.Contains(p, "x2") || strings.Contains(p, "tok-order-o000") || strings.Contains(p, "key t0/order-o000") {
		t.Fatalf("the page should draw t0/twice alone: twice %v, x2 %v, other key's token %v, other key's row %v",
			strings.Contains(p, "key t0/twice"), strings.Contains(p, "x2"), strings.Contains(p, "tok-order-o000"), strings.Contains(p, "key t0/order-o000"))
	}
}

// TestLinearizationPageTooLarge: a history kept only as too large to draw
// gets a short page that says so and why, with its size.
func TestLinearizationPageTooLarge(t *testing.T) {
	n := check.VisualizeCap + 10
	p := page(t, &check.Linearization{Ops: n, TooLarge: true})
	for _, want := range []string{"porcupine's visualisation is left out", fmt.Sprintf("The history has %d operations, more than the %d drawn in full", n, check.VisualizeCap)} {
		if !strings.Contains(p, want) {
			t.Errorf("the page does not say %q:\n%s", want, p)
		}
	}
	if len(p) > 4096 || !strings.HasPrefix(p, "<!DOCTYPE html>") {
		t.Errorf("want a short HTML page, got %d bytes", len(p))
	}
}

// TestWriteDrawsTheLinearization: a run's results directory holds
// linearizability-<scenario>.html for a scenario whose check kept a
// linearization, and none for one that kept nothing.
func TestWriteDrawsTheLinearization(t *testing.T) {
	h, l := linHistory([]string{"order-o000"}, "")
	kept := linearizability(t, h, l)
	d, err := report.PrepareRunDir(t.TempDir(), "memory", "correct", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	sum := &results.Summary{Store: "memory", Variant: "correct", Scenarios: []results.ScenarioResult{
		{Name: "kept", Verdict: check.Pass, Checkers: []check.Result{kept}},
		{Name: "none", Verdict: check.Pass, Checkers: []check.Result{{Checker: check.Linearizable, Verdict: check.Pass}}},
	}}
	if err := d.Write(sum); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(d.Path, "linearizability-kept.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("key t0/order-o000")) {
		t.Errorf("linearizability-kept.html (%d bytes) is not the drawn page", len(b))
	}
	if _, err := os.Stat(filepath.Join(d.Path, "linearizability-none.html")); !os.IsNotExist(err) {
		t.Errorf("a scenario that kept nothing got a page: %v", err)
	}
}
