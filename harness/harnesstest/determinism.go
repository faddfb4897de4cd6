package harnesstest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/results"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
)

// ScheduledNames lists the scheduled scenarios (scenario.Scenario.Scheduled),
// in order.
func ScheduledNames() []string {
	var out []string
	for _, sc := range scenario.All {
		if sc.Scheduled {
			out = append(out, sc.Name)
		}
	}
	return out
}

// ServerTTL is the determinism check's LockTTL on server-clock backends.
const ServerTTL = 2 * time.Second

// Deterministic runs every scheduled scenario on the named backend, seed
// 7, keys keys, runs times (up to twice as many while a scenario has fewer
// than two runs to compare, or no trace that most of them agree on), and
// fails t unless two or more compared runs, and more than half of them,
// give one Trace byte for byte, and says which took another path. On a server-clock backend the LockTTL is
// ServerTTL: on a server's clock a claim goes stale by itself once LockTTL
// has passed, so the steps between two ticks must take less; a run whose
// episodes took longer (scenario.ClockOutran: a loaded machine) is not
// compared, and says so. Every scenario must have two runs that are.
// TestScheduledRunsAreDeterministic runs it on the in-process and file
// backends (under -race), and on the servers in harness/scenario's tests.
func Deterministic(t *testing.T, backend string, runs, keys int) {
	t.Helper()
	scheduled := ScheduledNames()
	if len(scheduled) == 0 {
		t.Fatal("no scheduled scenarios")
	}
	traces := map[string][]string{} // each scenario's compared runs' traces, in order
	compared := map[string]int{}
	// A loaded machine may leave a scenario without two runs to compare
	// (2 of 3 Postgres runs outran LockTTL beside a CI rehearsal's suite),
	// or make one run's real-time waits take another path within LockTTL
	// (a Redis record expiring by the server's clock in a stalled
	// episode of sched-retention): up to as many runs again are made,
	// while one is short of two agreeing runs that are most of its runs.
	short := func() bool {
		return slices.ContainsFunc(scheduled, func(name string) bool {
			_, n := majority(traces[name])
			return n < 2 || 2*n <= len(traces[name])
		})
	}
	for i := 0; i < runs || i < 2*runs && short(); i++ {
		o := Options(t, backend, stores.Correct, scheduled...)
		o.Seed, o.Keys = 7, keys
		if o.Backend.Clock == stores.ServerClock {
			o.LockTTL, o.ScheduledLockTTL = ServerTTL, 0
		}
		sum, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sum.Scenarios {
			if s.History() == nil {
				t.Fatalf("%s: no history (%s %s)", s.Name, s.Verdict, s.Error)
			}
			if out := scenario.ClockOutran(s.Episodes, ServerTTL); out != "" {
				t.Logf("%s: run %d not compared: %s", s.Name, i+1, out)
				continue
			}
			compared[s.Name]++
			traces[s.Name] = append(traces[s.Name], Trace(t, s))
		}
	}
	for _, name := range scheduled {
		if compared[name] < 2 {
			t.Errorf("%s: %d of %d runs stayed within LockTTL between ticks: nothing to compare", name, compared[name], 2*runs)
			continue
		}
		want, n := majority(traces[name])
		for i, tr := range traces[name] {
			if tr == want {
				continue
			}
			if n >= 2 && 2*n > len(traces[name]) {
				t.Logf("%s: compared run %d of %d took another path than the %d that agree (a loaded machine's): %s", name, i+1, len(traces[name]), n, FirstDiff(want, tr))
			} else {
				t.Errorf("%s: compared run %d's trace differs from the most common one (%d of %d runs agree): %s", name, i+1, n, len(traces[name]), FirstDiff(want, tr))
			}
		}
	}
}

// majority is the most common of traces (the first of those tied) and
// how many runs gave it.
func majority(traces []string) (string, int) {
	count := map[string]int{}
	best, n := "", 0
	for _, tr := range traces {
		if count[tr]++; count[tr] > n {
			best, n = tr, count[tr]
		}
	}
	return best, n
}

// Trace is what a seed must fix in a scheduled scenario: every
// episode's scheduler choices, and the calls in the order they ran, each
// with its client, key, fingerprint and answer. Times and tokens (random
// by design) are left out.
func Trace(t testing.TB, s results.ScenarioResult) string {
	t.Helper()
	var b strings.Builder
	// An episode's real time between ticks is the machine's, not the seed's.
	recs := slices.Clone(s.Episodes)
	for i := range recs {
		recs[i].Unticked = 0
	}
	eps, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(eps)
	b.WriteByte('\n')
	// Tokens are random, and charge ids count charges across the episodes
	// that run at once on a server-clock store: each is named by the order
	// it first appears in, episode by episode, in the calls and in the
	// answers' bodies that quote it.
	ops := byEpisode(s)
	alias := map[string]string{}
	var short []string // token pairs for the replacer (fixed-length: no prefix of another)
	name := func(v, kind string) {
		if _, ok := alias[v]; !ok && v != "" {
			alias[v] = fmt.Sprintf("%s#%d", kind, len(alias)+1)
			if kind == "token" {
				short = append(short, v, alias[v])
			}
		}
	}
	for _, op := range ops {
		if op.IsClaim() {
			name(faults.ShortToken(string(op.Output.Decision.Token)), "token")
		}
		for _, id := range chargeID.FindAllString(op.Output.Decision.Response.Body+" "+op.Input.Response.Body, -1) {
			name(id, "charge")
		}
	}
	tokens := strings.NewReplacer(short...)
	rename := func(v string) string {
		return chargeID.ReplaceAllStringFunc(tokens.Replace(v), func(id string) string { return alias[id] })
	}
	for _, op := range ops {
		in, out := op.Input, op.Output
		fmt.Fprintf(&b, "client %d %s %s fp=%s", op.Client, in.Kind, in.Key, in.Fingerprint)
		if in.Token != "" {
			fmt.Fprintf(&b, " token=%s", rename(faults.ShortToken(string(in.Token))))
		}
		switch {
		case out.Unknown:
			b.WriteString(" → ?")
		case out.Fenced:
			b.WriteString(" → fenced")
		default:
			fmt.Fprintf(&b, " → %s takeover=%t resp=%d %q", out.Decision.Outcome, out.Decision.Takeover, out.Decision.Response.Status, rename(out.Decision.Response.Body))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// chargeID matches the provider's charge ids in answers' bodies.
var chargeID = regexp.MustCompile(`\bch_[0-9]+\b`)

// byEpisode orders the scenario's calls episode by episode, each episode's
// in the order they ran: on a server-clock store the episodes run at once,
// and only the order inside each one is the seed's. An episode's clients
// have the ids from its FirstClient to the next episode's; the runner's
// final probe comes last, key by key.
func byEpisode(s results.ScenarioResult) []history.Op {
	ops := slices.Clone(s.History().Ops()) // Ops is shared: sort a copy
	group := func(client int) int {
		g := 0
		for i, ep := range s.Episodes {
			if client >= ep.FirstClient {
				g = i
			}
		}
		return g
	}
	last := len(s.Episodes)
	groupOf := func(op history.Op) int {
		if s.Check != nil && op.Client == s.Check.ProbeClient {
			return last // the runner's final probe, after every episode
		}
		return group(op.Client)
	}
	sort.SliceStable(ops, func(i, j int) bool {
		gi, gj := groupOf(ops[i]), groupOf(ops[j])
		if gi != gj {
			return gi < gj
		}
		// The probes go key by key in the order the keys first appear,
		// which concurrent episodes leave to the clock: order them by key.
		return gi == last && ops[i].Input.Key.String() < ops[j].Input.Key.String()
	})
	return ops
}

// FirstDiff shows the first line where two traces part.
func FirstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  was: %s\n  now: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d vs %d lines)", len(al), len(bl))
}
