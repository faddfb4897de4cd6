package mutate_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/mutate"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/memory"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// wantIDs fails unless every one of want is among the mutants' IDs got.
func wantIDs(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("no mutant %s; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

func ids(ms []mutate.Mutant) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// The SQL rewriters: conjuncts of a WHERE dropped, comparisons flipped but
// not SET's assignments, SET columns dropped (a row assignment's name and
// value together), status literals swapped, a simple CASE's WHEN values
// left alone.
func TestGenerateSQL(t *testing.T) {
	stmts := []mutate.Statement{
		{Name: "complete", Text: "UPDATE t SET status = 'done', body = $4\nWHERE tenant = $1 AND key = $2 AND token = $3"},
		{Name: "begin", Text: `INSERT INTO t AS k (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET (d, tok) = (
SELECT d.decision, CASE d.decision WHEN 'takeover' THEN 1 ELSE k.tok END
FROM n, LATERAL (SELECT CASE WHEN k.fp <> $3 THEN 'mismatch' WHEN k.status = 'done' THEN 'replay' END AS decision) AS d)`},
	}
	got := ids(mutate.Generate(stmts))
	wantIDs(t, got,
		`complete: drop-conjunct "tenant = $1"`,
		`complete: drop-conjunct "token = $3"`,
		`complete: flip-comparison "token = $3" → "token <> $3"`,
		`complete: drop-set "status = 'done'"`,
		`complete: drop-set "body = $4"`,
		`complete: swap-status "'done'" → "'in_flight'"`,
		`begin: drop-set "d = d.decision"`,
		`begin: drop-set "tok = CASE d.decision WHEN 'takeover' THEN 1 ELSE k.tok END"`,
		`begin: drop-conjunct "k.fp <> $3"`,
		`begin: flip-comparison "k.fp <> $3" → "k.fp = $3"`,
		`begin: flip-comparison "k.status = 'done'" → "k.status <> 'done'"`,
		`complete: like-equals "token = $3" → "token LIKE $3"`,
		`complete: like-equals "tenant = $1" → "tenant LIKE $1"`,
	)
	for _, id := range got {
		// LIKE only where a column meets a parameter: not an assignment,
		// not two columns, not a literal.
		if strings.Contains(id, "like-equals") && (strings.Contains(id, "k.status") || strings.Contains(id, "body") || strings.Contains(id, "k.fp")) {
			t.Errorf("mutant %s is not a column compared with a parameter", id)
		}
		if strings.Contains(id, `"status = 'done'" → "status <> 'done'"`) || strings.Contains(id, `'takeover'" → `) {
			t.Errorf("mutant %s edits an assignment or a simple CASE's value", id)
		}
	}
	for _, m := range mutate.Generate(stmts) {
		// A dropped check or column keeps its positional parameter named
		// (Postgres refuses a statement given a parameter it does not use).
		if m.ID == `complete: drop-conjunct "token = $3"` && !strings.Contains(m.Text, "AND (token = $3 OR TRUE)") ||
			m.ID == `complete: drop-set "body = $4"` && !strings.Contains(m.Text, "body = CASE WHEN FALSE THEN $4 ELSE body END") {
			t.Errorf("%s loses its parameter:\n%s", m.ID, m.Text)
		}
		if m.ID == `complete: drop-set "status = 'done'"` && !strings.Contains(m.Text, "SET body = $4") {
			t.Errorf("%s:\n%s", m.ID, m.Text)
		}
		if m.Kind == mutate.DropSet && m.Statement == "begin" && strings.HasPrefix(m.From, "d =") {
			if want := "SET (tok) = (\nSELECT CASE d.decision"; !strings.Contains(m.Text, want) {
				t.Errorf("dropping a row assignment's column: want %q in\n%s", want, m.Text)
			}
		}
	}
}

// The boundary rewriter shifts each ordering comparison across its
// boundary, in SQL and in Lua, named by the comparison it sits in; a cast
// parameter is never made a LIKE.
func TestGenerateBoundaries(t *testing.T) {
	stmts := []mutate.Statement{
		{Name: "read", Text: "SELECT clock_timestamp() >= locked_at + $3::interval AS stale FROM t WHERE created_at <= $1::timestamptz AND n < 3"},
		{Name: "begin", Text: "local h = redis.call('HGET', KEYS[1], 'at')\nif now - locked_at < ttl then return 1 end\nif n > 0 and m <= 2 then return 2 end"},
	}
	got := ids(mutate.Generate(stmts))
	wantIDs(t, got,
		`read: shift-boundary "clock_timestamp() >= locked_at + $3::interval" → "clock_timestamp() > locked_at + $3::interval"`,
		`read: shift-boundary "created_at <= $1::timestamptz" → "created_at < $1::timestamptz"`,
		`read: shift-boundary "n < 3" → "n <= 3"`,
		`begin: shift-boundary "now - locked_at < ttl" → "now - locked_at <= ttl"`,
		`begin: shift-boundary "n > 0" → "n >= 0"`,
		`begin: shift-boundary "m <= 2" → "m < 2"`,
	)
	for _, id := range got {
		if strings.Contains(id, "like-equals") {
			t.Errorf("%s: no equality of a column and an uncast parameter here", id)
		}
	}
}

// The Lua rewriters: guards dropped, a condition's disjuncts dropped,
// comparisons and `not` flipped, HSET fields dropped, status literals
// swapped except in a reply.
func TestGenerateLua(t *testing.T) {
	src := `local h = redis.call('HMGET', KEYS[1], 'status', 'token')
if not h[1] then return 0 end
if h[1] ~= 'in_flight' or h[2] ~= ARGV[1] then return {'in_flight', 0} end
redis.call('HSET', KEYS[1], 'status', 'done', 'resp_status', ARGV[2])
return 1
`
	got := ids(mutate.Generate([]mutate.Statement{{Name: "complete", Text: src}}))
	wantIDs(t, got,
		`complete: drop-guard "if not h[1] then return 0 end"`,
		`complete: flip-comparison "not h[1]" → "h[1]"`,
		`complete: drop-conjunct "h[1] ~= 'in_flight'"`,
		`complete: drop-conjunct "h[2] ~= ARGV[1]"`,
		`complete: flip-comparison "h[2] ~= ARGV[1]" → "h[2] == ARGV[1]"`,
		`complete: drop-set "'resp_status', ARGV[2]"`,
		`complete: drop-set "'status', 'done'"`,
		`complete: swap-status "'done'" → "'in_flight'"`,
		`complete: swap-status "'in_flight'" → "'done'"`,
	)
	n := 0
	for _, id := range got {
		if strings.HasPrefix(id, `complete: swap-status "'in_flight'"`) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("want one swap of 'in_flight' (the reply's code is not a status), got %d:\n%s", n, strings.Join(got, "\n"))
	}
}

// sqliteOptions are the default options on a SQLite store in a temporary
// folder.
func sqliteOptions(t *testing.T) harness.Options {
	b, err := stores.Lookup("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	o := harness.DefaultOptions()
	o.Backend, o.Addr = b, t.TempDir()
	return o
}

// A handful of generated mutants of the SQLite store, run: the correct
// store passes first, a dropped fence and a swapped claim status die, and
// a conjunct the backend argues is implied is reported equivalent (with
// its argument), not hidden.
func TestRunSQLite(t *testing.T) {
	rep, err := mutate.Run(context.Background(), sqliteOptions(t), mutate.Options{
		Scenarios: []string{"sched-takeover", "sched-race"},
		// Bounded by episodes, not time: a seed's episodes are the same on
		// any machine, so the verdicts are too.
		Quick:    time.Minute,
		Episodes: 8,
		Only:     []string{`complete: drop-conjunct "token`, `claim: swap-status`, `takeover: drop-conjunct "status`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.BaselinePassed() {
		t.Fatalf("the correct store failed: %+v", rep.Baseline)
	}
	want := map[string]string{
		`complete: drop-conjunct "token = :token"`:       mutate.Killed,
		`claim: swap-status "'in_flight'" → "'done'"`:    mutate.Killed,
		`takeover: drop-conjunct "status = 'in_flight'"`: mutate.Equivalent,
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("ran %d mutants, want %d: %+v", len(rep.Results), len(want), rep.Results)
	}
	for _, r := range rep.Results {
		if r.Verdict != want[r.ID] {
			t.Errorf("%s: %s (%s %s), want %s", r.ID, r.Verdict, r.Checker, r.Detail, want[r.ID])
		}
		if r.Verdict == mutate.Equivalent && r.Argument == "" {
			t.Errorf("%s: equivalent without an argument", r.ID)
		}
		if len(r.Diff) < 2 {
			t.Errorf("%s: no diff: %q", r.ID, r.Diff)
		}
	}
	if rep.Killed != 2 || rep.Equivalent != 1 || rep.Score != 1 {
		t.Errorf("killed %d, equivalent %d, score %v; want 2, 1, 1", rep.Killed, rep.Equivalent, rep.Score)
	}
	// One row per rewrite that made a mutant, in Kinds' order.
	wantKinds := []mutate.KindCounts{
		{Kind: mutate.DropConjunct, Counts: mutate.Counts{Killed: 1, Equivalent: 1, Score: 1}},
		{Kind: mutate.SwapStatus, Counts: mutate.Counts{Killed: 1, Score: 1}},
	}
	if !slices.Equal(rep.Kinds, wantKinds) {
		t.Errorf("per rewrite: %+v, want %+v", rep.Kinds, wantKinds)
	}
}

// A LIKE on the token (a Release or a save that pattern-matches the token
// it is given) dies: abuse sends forged tokens holding % and _.
func TestRunSQLiteLikeToken(t *testing.T) {
	rep, err := mutate.Run(context.Background(), sqliteOptions(t), mutate.Options{
		Scenarios: []string{"abuse"},
		Quick:     time.Minute,
		Episodes:  2,
		Only:      []string{`release: like-equals "token`, `complete: like-equals "token`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.BaselinePassed() || len(rep.Results) != 2 {
		t.Fatalf("baseline %+v, %d results", rep.Baseline, len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Verdict != mutate.Killed {
			t.Errorf("%s: %s, want killed", r.ID, r.Verdict)
		}
	}
}

// A backend whose conditions are Go code is reported not applicable, with
// the reason, and nothing is run.
func TestRunNotApplicable(t *testing.T) {
	b, err := stores.Lookup("memory")
	if err != nil {
		t.Fatal(err)
	}
	o := harness.DefaultOptions()
	o.Backend = b
	rep, err := mutate.Run(context.Background(), o, mutate.Options{Quick: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NotApplicable == "" || len(rep.Results) != 0 {
		t.Errorf("memory: not applicable %q, %d results", rep.NotApplicable, len(rep.Results))
	}
}

// The default scenarios are the kill set, then General, each once.
func TestKillScenariosEndWithGeneral(t *testing.T) {
	b, err := stores.Lookup("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	scs := mutate.KillScenarios(b)
	if len(scs) <= len(mutate.General) || !slices.Equal(scs[len(scs)-len(mutate.General):], mutate.General) {
		t.Fatalf("KillScenarios = %v, want the kill set then %v", scs, mutate.General)
	}
	seen := map[string]bool{}
	for _, s := range scs {
		if seen[s] {
			t.Fatalf("%s twice in %v", s, scs)
		}
		seen[s] = true
	}
}

// A mutant whose scenario cannot be set up, while the correct statements
// cannot be either (the store's folder is gone: a machine's failure, not
// the edit's), is unjudged, not invalid: it is not scored, and the run
// counts it.
func TestSetupFailureIsUnjudged(t *testing.T) {
	o := sqliteOptions(t)
	dir := o.Addr
	broke := false
	rep, err := mutate.Run(context.Background(), o, mutate.Options{
		Scenarios: []string{"sched-race"},
		Quick:     time.Minute,
		Episodes:  2,
		Workers:   1,
		Only:      []string{`complete: drop-conjunct "token`, `claim: swap-status`},
		Progress: func(done, total int, r mutate.Result) {
			if !broke { // after the first mutant: the folder becomes a file
				broke = true
				if err := os.RemoveAll(dir); err != nil {
					t.Error(err)
				}
				if err := os.WriteFile(dir, []byte("not a folder"), 0o644); err != nil {
					t.Error(err)
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Verdict != mutate.Killed || rep.Results[1].Verdict != mutate.Unjudged {
		t.Fatalf("verdicts: %+v", rep.Results)
	}
	if rep.Killed != 1 || rep.Unjudged != 1 || rep.Invalid != 0 || rep.Score != 1 {
		t.Errorf("counts: %+v", rep.Counts)
	}
}

// TestGenerateSettings: a settings statement's values are each replaced
// by the weaker values a deployment may have, one mutant each, and a
// setting with no weaker value listed, or already weak, is left alone;
// a statement with the same lines under another name is not settings.
func TestGenerateSettings(t *testing.T) {
	text := "default_transaction_isolation = read committed\nsynchronous_commit  =  on\napplication_name = x\nmax_retries = 3\n"
	ms := mutate.Generate([]mutate.Statement{{Name: stores.SettingsStatement, Text: text}})
	wantIDs(t, ids(ms),
		`settings: weaken-setting "default_transaction_isolation = read committed" → "default_transaction_isolation = repeatable read"`,
		`settings: weaken-setting "default_transaction_isolation = read committed" → "default_transaction_isolation = serializable"`,
		`settings: weaken-setting "synchronous_commit = on" → "synchronous_commit = off"`)
	if len(ms) != 3 {
		t.Errorf("%d mutants, want 3: %v", len(ms), ids(ms))
	}
	for _, m := range ms {
		ss, err := stores.ParseSettings(m.Text)
		if err != nil || len(ss) != 4 {
			t.Fatalf("%s: %v, %v", m.ID, ss, err)
		}
		if m.Kind != mutate.WeakenSetting {
			t.Errorf("%s: kind %s", m.ID, m.Kind)
		}
	}
	if got := stores.SettingValue(must(stores.ParseSettings(ms[2].Text)), "synchronous_commit"); got != "off" {
		t.Errorf("edited value %q", got)
	}
	if other := mutate.Generate([]mutate.Statement{{Name: "claim", Text: "synchronous_commit = on"}}); slices.ContainsFunc(other, func(m mutate.Mutant) bool { return m.Kind == mutate.WeakenSetting }) {
		t.Errorf("a statement not named settings got setting mutants: %v", ids(other))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestInterruptedIsNotSurvived: an interrupt leaves what it cut short
// unjudged, never a survivor. A mutant that survived the quick pass but
// has not had its full one, and one never begun, are Interrupted (not
// scored); a kill found before the interrupt stays a kill; the report
// says it was interrupted.
func TestInterruptedIsNotSurvived(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := mutate.Run(ctx, sqliteOptions(t), mutate.Options{
		Scenarios: []string{"sched-takeover"},
		Quick:     time.Minute,
		Budget:    time.Minute,
		Episodes:  8,
		Workers:   1, // one at a time, in the order generated: takeover, complete, release
		Only:      []string{`takeover: drop-conjunct "status`, `complete: drop-conjunct "token`, `release: drop-conjunct "token`},
		// Told only of mutants done (a quick pass's survivor is not):
		// the first is the kill, and the interrupt comes then.
		Progress: func(int, int, mutate.Result) { cancel() },
	})
	if err == nil || rep == nil {
		t.Fatalf("err %v, report %v: want the interrupt's error and the report", err, rep)
	}
	want := map[string]string{
		`takeover: drop-conjunct "status = 'in_flight'"`: mutate.Interrupted, // survived its quick pass only
		`complete: drop-conjunct "token = :token"`:       mutate.Killed,
		`release: drop-conjunct "token = :token"`:        mutate.Interrupted, // never begun
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(rep.Results), len(want), rep.Results)
	}
	for _, r := range rep.Results {
		if r.Verdict != want[r.ID] {
			t.Errorf("%s: %s, want %s", r.ID, r.Verdict, want[r.ID])
		}
	}
	if !rep.Interrupted || rep.Killed != 1 || rep.Survived != 0 || rep.Equivalent != 0 || rep.Counts.Interrupted != 2 || rep.Score != 1 {
		t.Errorf("interrupted %v, counts %+v: want interrupted, 1 killed, 2 interrupted, nothing else", rep.Interrupted, rep.Counts)
	}
	if rep.BaselineFailed() || !rep.BaselinePassed() {
		t.Errorf("the correct store's runs, which ended before the interrupt: %+v", rep.Baseline)
	}
}

// TestOnlyMatchingNothing: --only that names no generated mutant is an
// error at once, before the correct store's runs, not a score of nothing.
func TestOnlyMatchingNothing(t *testing.T) {
	rep, err := mutate.Run(context.Background(), sqliteOptions(t), mutate.Options{
		Scenarios: []string{"sched-race"}, Quick: time.Minute, Episodes: 1,
		Only: []string{"no such mutant"},
	})
	if err == nil || rep != nil || !strings.Contains(err.Error(), `"no such mutant"`) {
		t.Fatalf("report %+v, err %v: want an error naming the pattern", rep, err)
	}
}
