package check_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/models"
	"github.com/idemcheck/idemcheck/stores"
)

// Small hand-built histories, one scenario each: for every checker at
// least one that must pass and one that must fail, unknown outcomes
// included. Times are in milliseconds of the history's clock; the
// caller's clock reads t0 plus the same.

const (
	ms    = int64(time.Millisecond)
	never = history.Never
	probe = 99 // the final liveness probe's client
)

var (
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	model = models.Config{LockTTL: 100 * time.Millisecond, Retention: 10 * time.Second}
	key   = stores.KeyRef{Tenant: "t0", Key: "order-o000"}
	resp  = stores.Response{Status: 201, Body: "charged ch_1"}
)

// rec builds a history.
type rec struct {
	h  *history.History
	l  *history.Ledger
	id int
	// clock is the store's declared clock the history is judged by
	// (models.Config.Clock); a server clock brings check.ServerClockSlack,
	// as check.ModelFor gives it.
	clock stores.ClockSource
	// unprobed are keys the final probe left out (check.Evidence.Unprobed).
	unprobed map[string]bool
}

func newRec() *rec { return &rec{h: history.New(), l: history.NewLedger()} }

func (r *rec) op(client int, in models.Input, out models.Output, call, ret int64) {
	r.id++
	in.ID = r.id
	if in.Key == (stores.KeyRef{}) && in.Kind != models.Prune {
		in.Key = key
	}
	if in.Now.IsZero() {
		in.Now = t0.Add(time.Duration(call))
	}
	op := history.Op{Client: client, Input: in, Output: out, Call: call * ms, Return: ret * ms}
	if out.Unknown {
		op.Return = never
	}
	r.h.AddOp(op)
}

// begin records a Begin by client at [call, ret] ms that answered d (its
// DecidedAt is set to the call time).
func (r *rec) begin(client int, fp string, call, ret int64, d stores.Decision) {
	r.beginOn(stores.KeyRef{}, client, fp, call, ret, d)
}

// beginOn is begin on key k (the zero KeyRef: the default key).
func (r *rec) beginOn(k stores.KeyRef, client int, fp string, call, ret int64, d stores.Decision) {
	d.DecidedAt = t0.Add(time.Duration(call * ms))
	r.op(client, models.Input{Kind: models.Begin, Fingerprint: fp, Key: k}, models.Output{Decision: d}, call, ret)
}

func (r *rec) beginUnknown(client int, fp string, call int64) {
	r.op(client, models.Input{Kind: models.Begin, Fingerprint: fp}, models.Output{Unknown: true}, call, 0)
}

func claimedD(tok string, takeover bool) stores.Decision {
	return stores.Decision{Outcome: stores.Claimed, Token: stores.Token(tok), Takeover: takeover}
}

var (
	inFlightD = stores.Decision{Outcome: stores.InFlight}
	mismatchD = stores.Decision{Outcome: stores.Mismatch}
)

func replayD(r stores.Response) stores.Decision {
	return stores.Decision{Outcome: stores.Replay, Response: r}
}

func (r *rec) complete(client int, tok string, res stores.Response, call, ret int64, fenced, unknown bool) {
	r.op(client, models.Input{Kind: models.Complete, Token: stores.Token(tok), Response: res, Now: t0.Add(time.Duration(ret * ms))},
		models.Output{Fenced: fenced, Unknown: unknown}, call, ret)
}

func (r *rec) release(client int, tok string, call, ret int64, fenced bool) {
	r.op(client, models.Input{Kind: models.Release, Token: stores.Token(tok), Now: t0.Add(time.Duration(ret * ms))},
		models.Output{Fenced: fenced}, call, ret)
}

// extend records a heartbeat of token tok (stores.Extender.Extend).
func (r *rec) extend(client int, tok string, call, ret int64, fenced bool) {
	r.op(client, models.Input{Kind: models.Extend, Token: stores.Token(tok), Called: t0.Add(time.Duration(call * ms)), Now: t0.Add(time.Duration(ret * ms))},
		models.Output{Fenced: fenced}, call, ret)
}

func (r *rec) work(client int, tok string, start, end int64) {
	e := end * ms
	if end < 0 {
		e = never
	}
	r.h.AddWork(history.WorkRun{Client: client, Key: key, Order: "o000", Token: stores.Token(tok), Start: start * ms, End: e})
}

// beatingWork is work that meant to take planned ms, sleeping beat ms
// between heartbeats (WorkRun.Planned, WorkRun.Beat).
func (r *rec) beatingWork(client int, tok string, start, end, planned, beat int64) {
	r.h.AddWork(history.WorkRun{Client: client, Key: key, Order: "o000", Token: stores.Token(tok), Start: start * ms, End: end * ms,
		Planned: time.Duration(planned) * time.Millisecond, Beat: time.Duration(beat) * time.Millisecond})
}

// plannedWork is work that meant to take planned ms (WorkRun.Planned).
func (r *rec) plannedWork(client int, tok string, start, end, planned int64) {
	r.h.AddWork(history.WorkRun{Client: client, Key: key, Order: "o000", Token: stores.Token(tok), Start: start * ms, End: end * ms,
		Planned: time.Duration(planned) * time.Millisecond})
}

func (r *rec) answer(client int, fp string, res stores.Response, at int64) {
	r.h.AddAnswer(history.Answer{Client: client, Key: key, Order: "o000", Fingerprint: fp, Response: res, Status: res.Status, At: at * ms})
}

// judge runs the checkers and returns the named one's result.
func (r *rec) judge(t *testing.T, name string) check.Result {
	t.Helper()
	m := model
	if m.Clock = r.clock; m.Clock == stores.ServerClock {
		m.Slack = check.ServerClockSlack
	}
	for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: m, ProbeClient: probe, Unprobed: r.unprobed, LinTimeout: 10 * time.Second}) {
		if c.Checker == name {
			return c
		}
	}
	t.Fatalf("no checker %s", name)
	return check.Result{}
}

func want(t *testing.T, r *rec, name string, v check.Verdict, detail string) {
	t.Helper()
	got := r.judge(t, name)
	if got.Verdict != v {
		t.Fatalf("%s: %s (%s), want %s", name, got.Verdict, got.Detail, v)
	}
	if v == check.Fail && (len(got.Violations) == 0 || !strings.Contains(got.Violations[0].Detail, detail)) {
		t.Fatalf("%s: violations %+v, want one saying %q", name, got.Violations, detail)
	}
	if v != check.Fail && !strings.Contains(got.Detail, detail) {
		t.Fatalf("%s: %s (%s), want it to say %q", name, got.Verdict, got.Detail, detail)
	}
}

// happy is one order done right: A claims, works, saves; B is told 409
// while A works and then replayed A's answer.
func happy() *rec {
	r := newRec()
	r.begin(1, "fp", 0, 1, claimedD("a", false))
	r.work(1, "a", 1, 5)
	r.l.Charge("o000", "charge:o000", 1, 3*ms)
	r.begin(2, "fp", 2, 3, inFlightD)
	r.complete(1, "a", resp, 5, 6, false, false)
	r.begin(2, "fp", 20, 21, replayD(resp))
	r.answer(1, "fp", resp, 6)
	r.answer(2, "fp", resp, 21)
	r.begin(probe, "fp", 300, 301, replayD(resp))
	return r
}

func TestEveryCheckerPassesAHealthyHistory(t *testing.T) {
	r := happy()
	m := model
	if m.Clock = r.clock; m.Clock == stores.ServerClock {
		m.Slack = check.ServerClockSlack
	}
	for _, c := range check.Run(check.Evidence{Hist: r.h, Ledger: r.l, Model: m, ProbeClient: probe, Unprobed: r.unprobed, LinTimeout: 10 * time.Second}) {
		if c.Verdict != check.Pass {
			t.Errorf("%s: %s: %s", c.Checker, c.Verdict, c.Detail)
		}
	}
}

// TestDocsAndPreference: every checker Run reports is documented, in the
// same order, and ranked by Preference.
func TestDocsAndPreference(t *testing.T) {
	res := check.Run(check.Evidence{Hist: history.New(), Ledger: history.NewLedger(), Model: model, ProbeClient: probe, LinTimeout: time.Second})
	if len(res) != len(check.Docs) || len(res) != len(check.Preference) {
		t.Fatalf("%d results, %d docs, %d in the preference", len(res), len(check.Docs), len(check.Preference))
	}
	for i, r := range res {
		if r.Checker != check.Docs[i].Name {
			t.Errorf("result %d is %s, doc %d is %s", i, r.Checker, i, check.Docs[i].Name)
		}
	}
}

// TestNothingJudgedIsNotAPass: checkers that all passed on nothing (an
// empty history) do not make a pass.
func TestNothingJudgedIsNotAPass(t *testing.T) {
	res := check.Run(check.Evidence{Hist: history.New(), Ledger: history.NewLedger(), Model: model, ProbeClient: probe, LinTimeout: time.Second})
	for _, r := range res {
		if r.Judged != 0 {
			t.Errorf("%s judged %d things in an empty history", r.Checker, r.Judged)
		}
	}
	if v, _ := check.Overall(res); v == check.Pass {
		t.Errorf("an empty history is %s", v)
	}
	if v, _ := check.Overall(check.Run(check.Evidence{Hist: happy().h, Ledger: happy().l, Model: model, ProbeClient: probe, LinTimeout: time.Second})); v != check.Pass {
		t.Errorf("a healthy history is %s", v)
	}
}
