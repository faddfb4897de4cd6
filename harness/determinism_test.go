package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/harnesstest"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/stores"
	_ "github.com/idemcheck/idemcheck/stores/postgres"
	_ "github.com/idemcheck/idemcheck/stores/redis"
	_ "github.com/idemcheck/idemcheck/stores/sqlite"
)

// scheduledTrace is what a seed must fix in a scheduled scenario: every
// episode's scheduler choices, and the calls in the order they ran, each
// with its client, key, fingerprint and answer. Times and tokens (random
// by design) are left out.
func scheduledTrace(t *testing.T, s harness.ScenarioResult) string {
	t.Helper()
	var b strings.Builder
	eps, err := json.Marshal(s.Episodes)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(eps)
	b.WriteByte('\n')
	// Tokens are random: each is named by the order it was handed out in,
	// in the calls and in the answers' bodies that quote it.
	alias := map[stores.Token]string{}
	var short []string
	for _, op := range s.History().Ops() {
		if op.IsClaim() {
			tok := op.Output.Decision.Token
			if _, ok := alias[tok]; !ok {
				alias[tok] = fmt.Sprintf("token#%d", len(alias)+1)
				short = append(short, faults.ShortToken(string(tok)), alias[tok])
			}
		}
	}
	names := strings.NewReplacer(short...)
	for _, op := range byEpisode(s) {
		in, out := op.Input, op.Output
		fmt.Fprintf(&b, "client %d %s %s fp=%s", op.Client, in.Kind, in.Key, in.Fingerprint)
		if in.Token != "" {
			fmt.Fprintf(&b, " token=%s", names.Replace(faults.ShortToken(string(in.Token))))
		}
		switch {
		case out.Unknown:
			b.WriteString(" → ?")
		case out.Fenced:
			b.WriteString(" → fenced")
		default:
			fmt.Fprintf(&b, " → %s takeover=%t resp=%d %q", out.Decision.Outcome, out.Decision.Takeover, out.Decision.Response.Status, names.Replace(out.Decision.Response.Body))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// byEpisode orders the scenario's calls episode by episode, each episode's
// in the order they ran: on a server-clock store the episodes run at once,
// and only the order inside each one is the seed's. An episode's clients
// have the ids from its FirstClient to the next episode's; calls after the
// last episode (the runner's probes) come last, in their order.
func byEpisode(s harness.ScenarioResult) []history.Op {
	ops := s.History().Ops()
	group := func(client int) int {
		g := 0
		for i, ep := range s.Episodes {
			if client >= ep.FirstClient {
				g = i
			}
		}
		return g
	}
	sort.SliceStable(ops, func(i, j int) bool { return group(ops[i].Client) < group(ops[j].Client) })
	return ops
}

// TestScheduledRunsAreDeterministic: the same seed gives the same trace of
// every sched-* scenario, byte for byte, in 10 runs of 10 on the in-process
// and the file backends. The server backends, whose ticks wait out a real
// LockTTL, run IDEM_DETERMINISM_RUNS times (3 by default, on one key;
// `make determinism` runs 10 of each backend on two keys).
func TestScheduledRunsAreDeterministic(t *testing.T) {
	serverRuns, serverKeys := 3, 1
	if v := os.Getenv("IDEM_DETERMINISM_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			t.Fatalf("IDEM_DETERMINISM_RUNS=%q: want a number of runs, 2 or more", v)
		}
		serverRuns, serverKeys = n, 2
	}
	var scheduled []string
	for _, sc := range scenario.All {
		if ok, _ := scenario.Episode(sc.Name); ok {
			scheduled = append(scheduled, sc.Name)
		}
	}
	if len(scheduled) == 0 {
		t.Fatal("no scheduled scenarios")
	}
	for _, backend := range []string{"memory", "sqlite", "postgres", "redis"} {
		t.Run(backend, func(t *testing.T) {
			runs, keys := 10, 2
			if b, _ := stores.Lookup(backend); b.Lives == stores.Server {
				runs, keys = serverRuns, serverKeys
			}
			first := map[string]string{}
			for i := range runs {
				o := harnesstest.Options(t, backend, stores.Correct, scheduled...)
				o.Seed, o.Keys = 7, keys
				sum, err := harness.Run(context.Background(), o)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range sum.Scenarios {
					if s.History() == nil {
						t.Fatalf("%s: no history (%s %s)", s.Name, s.Verdict, s.Error)
					}
					tr := scheduledTrace(t, s)
					if i == 0 {
						first[s.Name] = tr
						continue
					}
					if tr != first[s.Name] {
						t.Errorf("%s: run %d's trace differs from run 1's: %s", s.Name, i+1, firstDiff(first[s.Name], tr))
					}
				}
			}
		})
	}
}

// firstDiff shows the first line where two traces part.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  was: %s\n  now: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d vs %d lines)", len(al), len(bl))
}
