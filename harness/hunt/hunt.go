// Package hunt proves the harness's power: it hunts each mutant (a store
// or client that re-creates a classic bug) with the scenario meant to kill
// it until a checker fails, shrinks the killing interleaving to the
// shortest one, runs the mutant matrix (every mutant, several seeds, and
// the correct store on the same scenarios), and replays a mutant's minimal
// interleaving step by step as a demo.
package hunt

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/idemcheck/idemcheck/harness"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/report"
	"github.com/idemcheck/idemcheck/harness/scenario"
	"github.com/idemcheck/idemcheck/harness/sched"
	"github.com/idemcheck/idemcheck/harness/workload"
	"github.com/idemcheck/idemcheck/stores"
)

// Kill is what hunting one mutant found: whether a checker caught it, which
// one, how fast, and the trace of the key it broke.
type Kill struct {
	Mutant   string `json:"name"`
	Side     string `json:"side"` // "store", "client" or "config"
	Scenario string `json:"scenario"`
	Killed   bool   `json:"killed"`
	// Checker is the checker that names the bug best among those that
	// failed (see checkerPreference); Checkers lists all that failed.
	Checker  string   `json:"checker"`
	Checkers []string `json:"checkers,omitempty"`
	Detail   string   `json:"detail,omitempty"`
	// Seconds runs from the start of the hunt (store open) to the end of
	// the episode, or round, whose check found the first violation,
	// checking included.
	Seconds float64 `json:"seconds"`
	// Episodes counts the scheduled episodes (or, for a scenario that is
	// not scheduled, the rounds) run, the killing one included.
	Episodes int `json:"episodes"`
	// Trace is every event on the violated key, in time order.
	Trace []string `json:"trace"`
	// Schedule is the killing episode's interleaving: the scheduler's
	// decisions and the statements each client ran.
	Schedule []string `json:"schedule,omitempty"`
	// Skipped says why the mutant's scenario could not run here.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Hunted is how long the hunt ran, in seconds: to the kill, or until
	// it gave up (Options.Budget) for a mutant that survived, whose
	// Seconds are 0.
	Hunted float64 `json:"hunted,omitempty"`
	// Shrink: how many replays shrinking tried, and how many trace lines
	// the first killing episode had (Trace is the shortest found).
	ShrinkRuns int `json:"shrink_runs,omitempty"`
	FirstTrace int `json:"first_trace_lines,omitempty"`
	choices    []int
	// key is the violated key (Trace's); round the killing round of a
	// scenario that is not scheduled: a demo runs the same on the correct
	// store.
	key   string
	round int
	// episodeKey is the killing episode's key index (its kind: see
	// scenario.EpisodeKinds), for its replays.
	episodeKey int
	log        []sched.Event // the killing episode's log (scheduled scenarios)
	// hist and ledger are the killing run's, for a demo's trace.
	hist   *history.History
	ledger *history.Ledger
}

// Options bound a hunt.
type Options struct {
	// Budget: give up (the mutant survives) after this long.
	Budget time.Duration
	// Keys per round of a scenario that is not scheduled (scheduled
	// scenarios run one key per episode).
	Keys int
	// Episodes, if positive, also stops the hunt after this many episodes
	// (or rounds): a bound that does not depend on the machine's speed,
	// since a seed's episodes are the same whatever the clock says.
	Episodes int
	// MinEpisodes, if positive, runs at least this many episodes (or
	// rounds) before Budget may stop the hunt: on a loaded machine one
	// round of a slow scenario can outlast the whole budget (a failover
	// round took over 90 s beside the test suite), and one round is not
	// a hunt. A hunt still stops at its first kill, so a mutant that
	// dies early costs nothing more.
	MinEpisodes int
	// Shrink: after a scheduled kill, replay the killing episode's
	// choices, simplified (rapid's way: shorter, and toward the first
	// option), keeping the shortest trace that still kills, until this
	// long after the hunt began, and for at least a third of it after a
	// late kill (shrinkBudget). Not counted in Kill.Seconds. 0: no
	// shrinking.
	Shrink time.Duration
	// ServerLockTTL, if positive, is the LockTTL of a scheduled scenario on
	// a server-clock store instead of ScheduledServerLockTTL. Longer
	// proves the same at the cost of the ticks that wait it out, and keeps
	// findable on a loaded machine a kill that needs a claim still live a
	// few steps later: under make test's load Redis's
	// prune-sweeps-in-flight, killed in 9 to 35 episodes idle, survived
	// 698 at 100 ms, every claim it swept already stale by the time the
	// next one came.
	ServerLockTTL time.Duration
}

// ScheduledServerLockTTL is the LockTTL of scheduled scenarios on
// server-clock stores in a hunt (harness.ScheduledServerLockTTL).
const ScheduledServerLockTTL = harness.ScheduledServerLockTTL

// MutantScenario says which scenario is meant to kill the mutant and on
// which side of the contract the bug lives (its row of stores.Catalogue);
// ok is false for an unknown one.
func MutantScenario(mutant string) (scenario, side string, ok bool) {
	m, ok := stores.LookupMutant(mutant)
	return m.Scenario, string(m.Side), ok
}

// OptionsFor adapts the run's options to a hunt: the scheduled scenarios
// on server-clock stores get ScheduledServerLockTTL unless the options set
// their own (harness.Options.LockTTLFor decides from it).
func OptionsFor(o harness.Options) harness.Options {
	if o.ScheduledLockTTL <= 0 {
		o.ScheduledLockTTL = ScheduledServerLockTTL
	}
	return o
}

// RateKeys are the keys per round, at least, of a hunt whose mutant's
// killer judges a rate ([check.Availability]: the share of Begins owed
// 409 that got an error): it needs Begins that meet a live claim to
// judge, a race round makes a few per key, and it judges none near a
// harness stall. At two keys a round, postgres-repeatable-read's hunt
// went 62 rounds without a kill beside four busy CPUs. (Most of that was
// the race's cold connection pool, which the race now warms first, see
// scenario's warmConnections: with it, two keys a round killed it in one
// to three rounds on an idle machine; the keys are the margin for a
// loaded one.)
const RateKeys = 16

// Hunt runs the mutant against the scenario meant to kill it until a
// checker fails or the budget runs out. o names the backend, where it
// lives and the seed; o.Variant is set from the mutant. An error means the
// hunt could not run (the store could not be opened).
func Hunt(ctx context.Context, o harness.Options, mutant string, h Options) (*Kill, error) {
	name, side, ok := MutantScenario(mutant)
	if !ok {
		return nil, fmt.Errorf("unknown mutant %q", mutant)
	}
	o.Variant = mutant
	if m, ok := stores.LookupMutant(mutant); ok {
		if m.Strict {
			o.StrictRetention, o.StrictAvailability = true, true // its bug is a finding unless strict
		}
		if m.Checker == check.Availability {
			h.Keys = max(h.Keys, RateKeys)
		}
	}
	k, err := HuntScenario(ctx, o, name, h)
	if k != nil {
		k.Mutant, k.Side = mutant, side
	}
	return k, err
}

// HuntScenario runs the named scenario against the store of o (its variant,
// and its statements as o.Statements edits them) until a checker fails or
// the budget runs out: Hunt's loop, for a store that is not a registered
// mutant (`idemcheck mutate` hunts generated ones with it). The Kill's
// Mutant and Side are left for the caller to name.
func HuntScenario(ctx context.Context, o harness.Options, name string, h Options) (*Kill, error) {
	sc, ok := scenario.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q", name)
	}
	o = OptionsFor(o)
	if h.ServerLockTTL > 0 && sc.Scheduled {
		o.LockTTL, o.ScheduledLockTTL = h.ServerLockTTL, h.ServerLockTTL
	}
	o.Scenarios = []string{name}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	k := &Kill{Scenario: name, Trace: []string{}}
	if why := sc.WhyNot(o.Caps()); why != "" {
		k.Skipped = why
		return k, nil
	}
	if h.Budget <= 0 {
		h.Budget = time.Minute
	}
	if sc.Scheduled {
		start := time.Now()
		err := huntEpisodes(ctx, o, sc, h, k)
		k.Hunted = time.Since(start).Seconds()
		return k, err
	}
	if o.OwnServer != nil && o.FaultsItsServer(sc) {
		// It kills and restarts the server, which other hunts and runs
		// beside this one share: a restart (and a configuration mutant's
		// settings, as redis-no-persistence's) would be their loss, with
		// no fault of theirs recorded. A caller that runs hunts side by
		// side without a way to start a server runs this one alone.
		srv, err := o.OwnServer(ctx)
		if err != nil {
			k.Skipped = "its server of its own did not start: " + err.Error()
			return k, nil
		}
		defer srv.Close()
		o.Addr, o.Net, o.Server, o.NoServer = srv.Addr, srv.Net, srv.Server, ""
	}
	start := time.Now()
	err := huntRounds(ctx, o, sc, h, k)
	k.Hunted = time.Since(start).Seconds()
	return k, err
}

// Episodes runs one scheduled scenario's episodes, one at a time, on one
// store, each on a fresh key with its own history: the hunt's loop, and
// what a property test drives with a rapid chooser.
type Episodes struct {
	o       harness.Options
	name    string
	probe   bool
	env     *scenario.Env
	tenants int
}

// Episode is the record of one scheduled episode.
type Episode struct {
	Hist   *history.History
	Ledger *history.Ledger
	// Log is the interleaving: the scheduler's decisions, the statements
	// each client ran, the clock ticks.
	Log []sched.Event
	// Checks are the checkers' results ([check.Run]) on the episode's history.
	Checks []check.Result
	// Err is set when the scheduler gave up (its history is still checked).
	Err error
}

// NewEpisodes opens a store of o.Backend (variant o.Variant: a store
// variant or a client-side mutant) for the scheduled scenario's episodes.
// Close it when done.
func NewEpisodes(ctx context.Context, o harness.Options, name string) (*Episodes, error) {
	scheduled, probe := scenario.Episode(name)
	if !scheduled {
		return nil, fmt.Errorf("%q is not a scheduled scenario", name)
	}
	sc, _ := scenario.Lookup(name)
	o.Keys = 1
	env, err := o.NewEnv(ctx, sc, sc.Name, harness.NewRunID(), o.Seed)
	if err != nil {
		return nil, err
	}
	env.UseSchedClock()
	return &Episodes{o: o, name: name, probe: probe, env: env}, nil
}

// Close closes the store.
func (r *Episodes) Close() error { return r.env.Store.Close() }

// Int63 draws a seed for the next episode's chooser from the episodes'
// PRNG (seeded by the run's seed).
func (r *Episodes) Int63() int64 { return r.env.Int63() }

// Run runs one episode with the chooser, probes its key for liveness when
// the scenario asks for it, and checks its history.
func (r *Episodes) Run(ctx context.Context, ch sched.Chooser) *Episode { return r.RunKey(ctx, 0, ch) }

// RunKey is Run for the episode of key index k, whose kind
// (scenario.EpisodeKinds) may differ from key 0's.
func (r *Episodes) RunKey(ctx context.Context, k int, ch sched.Chooser) *Episode {
	env := r.env
	env.Fresh(fmt.Sprintf("h%d", r.tenants))
	r.tenants++
	stopWatch := history.WatchStalls(env.Hist)
	log, err := scenario.RunEpisode(ctx, env, r.name, k, ch)
	j := r.o.Finish(ctx, env, stopWatch, r.probe, false)
	return &Episode{Hist: env.Hist, Ledger: env.Ledger, Log: log, Checks: j.Checkers, Err: err}
}

// huntEpisodes runs the scheduled scenario one episode at a time on one
// store, checking each episode's history on its own.
func huntEpisodes(ctx context.Context, o harness.Options, sc scenario.Scenario, h Options, k *Kill) error {
	eps, err := NewEpisodes(ctx, o, sc.Name)
	if err != nil {
		return err
	}
	defer eps.Close()
	// episode runs one episode of key index key with the chooser and
	// judges it into try.
	episode := func(ch sched.Chooser, key int, try *Kill) error {
		rec := &sched.Recording{Next: ch}
		ep := eps.RunKey(ctx, key, rec)
		if ep.Err != nil {
			try.Error = ep.Err.Error() // a stuck episode still has a history worth checking
		}
		if judge(try, ep.Checks, ep.Hist, ep.Ledger) {
			try.Schedule, try.choices, try.log, try.episodeKey = describeLog(ep.Log), rec.Choices(), ep.Log, key
		}
		return ctx.Err()
	}
	start := time.Now()
	for ep := 0; h.more(ep, start); ep++ {
		// Each kind of episode in turn, as a run's keys have them.
		if err := episode(sched.NewRandom(eps.Int63()), ep%scenario.EpisodeKinds, k); err != nil {
			return err
		}
		k.Episodes = ep + 1
		if k.Killed {
			k.Seconds = time.Since(start).Seconds()
			if h.Shrink > 0 {
				shrink(k, shrinkBudget(h.Shrink, time.Since(start)), episode)
			}
			return nil
		}
	}
	k.Seconds = time.Since(start).Seconds()
	return nil
}

// shrinkBudget is how long a hunt that killed after hunted may shrink
// its kill: what is left of Shrink since the hunt began, and at least a
// third of Shrink. A hunt that killed late, shrinking a whole Shrink
// after its kill, was the mutant matrix's tail (Postgres's
// takeover-ignores-fingerprint killed at 4.3 s, then shrank 3.9 s more
// while every other lane sat idle): polishing a trace is worth less than
// the run's wall time, and a third of it still shortens most traces.
func shrinkBudget(shrink, hunted time.Duration) time.Duration {
	return max(shrink-hunted, shrink/3)
}

// shrink replays simplified versions of the killing episode's choices
// (cut short, one choice removed, one choice made 0: the first option, as
// rapid shrinks) and keeps any that still kills with a shorter trace, until
// none does or the budget is spent.
func shrink(k *Kill, budget time.Duration, episode func(sched.Chooser, int, *Kill) error) {
	deadline := time.Now().Add(budget)
	k.FirstTrace = len(k.Trace)
	better := func(t *Kill) bool {
		return t.Killed && (len(t.Trace) < len(k.Trace) || len(t.Trace) == len(k.Trace) && len(t.choices) < len(k.choices))
	}
	for improved := true; improved && time.Now().Before(deadline); {
		improved = false
		for _, cand := range candidates(k.choices) {
			if time.Now().After(deadline) {
				return
			}
			try := &Kill{Trace: []string{}}
			if episode(&sched.Replay{Choices: cand}, k.episodeKey, try) != nil {
				return
			}
			k.ShrinkRuns++
			if better(try) {
				k.Checker, k.Checkers, k.Detail, k.Trace, k.Schedule, k.choices, k.key, k.log = try.Checker, try.Checkers, try.Detail, try.Trace, try.Schedule, try.choices, try.key, try.log
				k.hist, k.ledger = try.hist, try.ledger
				improved = true
				break
			}
		}
	}
}

// candidates lists simpler choice sequences, the boldest first: halves cut
// off the end, each choice deleted, each choice set to 0.
func candidates(c []int) [][]int {
	var out [][]int
	for n := len(c) / 2; n > 0; n /= 2 {
		out = append(out, append([]int(nil), c[:len(c)-n]...))
	}
	for i := range c {
		d := append(append([]int(nil), c[:i]...), c[i+1:]...)
		out = append(out, d)
	}
	for i := range c {
		if c[i] != 0 {
			z := append([]int(nil), c...)
			z[i] = 0
			out = append(out, z)
		}
	}
	return out
}

// more reports whether a hunt begun at start runs its episode (or round)
// n: the first always; then while the budget lasts or fewer than
// MinEpisodes ran, and never past Episodes.
func (h Options) more(n int, start time.Time) bool {
	if n == 0 {
		return true
	}
	if h.Episodes > 0 && n >= h.Episodes {
		return false
	}
	return time.Since(start) < h.Budget || n < h.MinEpisodes
}

// huntRounds runs a scenario that is not scheduled, round after round, each
// on a fresh store, until a round fails.
func huntRounds(ctx context.Context, o harness.Options, sc scenario.Scenario, h Options, k *Kill) error {
	if h.Keys > 0 {
		o.Keys = h.Keys
	}
	start := time.Now()
	for round := 0; h.more(round, start); round++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		res, err := harness.RunScenario(ctx, o, sc, harness.NewRunID(), round, round, func(harness.Progress) {})
		if err != nil {
			return err
		}
		k.Episodes, k.round = round+1, round
		if res.Verdict == check.Fail && judge(k, res.Checkers, res.History(), res.Ledger()) {
			k.Seconds = time.Since(start).Seconds()
			return nil
		}
	}
	k.Seconds = time.Since(start).Seconds()
	return nil
}

// judge fills in the kill from the checkers' results, if any failed.
func judge(k *Kill, res []check.Result, hist *history.History, ledger *history.Ledger) bool {
	k.Checkers = nil
	for _, c := range res {
		if c.Verdict == check.Fail {
			k.Checkers = append(k.Checkers, c.Checker)
		}
	}
	c, ok := check.Worst(res)
	if !ok {
		return false
	}
	k.Killed, k.Checker, k.hist, k.ledger = true, c.Checker, hist, ledger
	v := c.Violations[0]
	k.Detail = v.Detail
	k.key = v.Key
	k.Trace = report.TraceLines(hist, ledger, v.Key)
	if orderKey(hist, v.Key) != v.Key && orderOf(hist, v.Key) == v.Key {
		// A violation named by order, not key (at-most-once's): the
		// trace of every key sent with it. The order's own trace held
		// the prunes alone (top-hop-only's shortest trace showed none
		// of its charges).
		k.key = orderKey(hist, v.Key)
		k.Trace = orderTrace(hist, ledger, v.Key)
	}
	return true
}

// orderKey finds the key of an order (at-most-once names orders).
func orderKey(hist *history.History, order string) string {
	for _, w := range hist.Work() {
		if w.Order == order {
			return w.Key.String()
		}
	}
	for _, a := range hist.Answers() {
		if a.Order == order {
			return a.Key.String()
		}
	}
	return order
}

// describeLog prints an episode's log: who ran from where, what each
// statement returned, the clock ticks.
func describeLog(log []sched.Event) []string {
	var out []string
	for _, e := range log {
		switch e.Kind {
		case sched.Granted:
			out = append(out, fmt.Sprintf("%s runs from %s", e.Client, e.Failpoint))
		case sched.Statement:
			out = append(out, fmt.Sprintf("  %s: %s → %s", e.Client, condense(e.Stmt, 90), e.Result))
		case sched.Acted, sched.Picked, sched.Blocked, sched.Note:
			out = append(out, e.String())
		}
	}
	return out
}

// condense prints a statement on one line of at most max characters:
// whitespace collapsed, long parenthesised lists elided, an INSERT's
// SELECT list and a CTE's name-only head shortened, the tail cut.
func condense(stmt string, max int) string {
	s := strings.Join(strings.Fields(stmt), " ")
	var b strings.Builder
	depth, open := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			if depth == 0 {
				open = b.Len()
			}
			depth++
		case ')':
			if depth > 0 {
				depth--
				if depth == 0 {
					inner := b.String()[open:]
					if len(inner) > 24 {
						trimmed := b.String()[:open]
						b.Reset()
						b.WriteString(trimmed)
						b.WriteString("(…")
					}
				}
			}
		}
		b.WriteByte(s[i])
	}
	out := b.String()
	out = insertSelectRE.ReplaceAllString(out, "SELECT … FROM n ON CONFLICT")
	out = strings.Replace(out, " AS MATERIALIZED (…)", " (…)", 1)
	if max > 0 && len([]rune(out)) > max {
		out = string([]rune(out)[:max-1]) + "…"
	}
	return out
}

// insertSelectRE is the SELECT list of an INSERT … SELECT … FROM n.
var insertSelectRE = regexp.MustCompile(`SELECT [^;]*? FROM n ON CONFLICT`)

// MutantsFor lists the mutants `idemcheck mutants` hunts on a backend: its
// store-side (and configuration) mutants, then every client-side one.
func MutantsFor(b stores.Backend) []string {
	out := append([]string(nil), b.Mutants...)
	return append(out, workload.ClientMutantNames()...)
}

// KillScenarios lists the scenarios that kill the mutants, each once, in
// the order of the mutants: the correct store must pass each.
func KillScenarios(mutants []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range mutants {
		if sc, _, ok := MutantScenario(m); ok && !seen[sc] {
			seen[sc] = true
			out = append(out, sc)
		}
	}
	return out
}

// Median returns the median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Replay runs one recorded episode of a scheduled scenario again, on a
// fresh store of o, on the same interleaving (the recorded choices, taken
// back by sched.Replay), probes its key, and checks it: how a saved
// failure is seen again statement by statement.
func Replay(ctx context.Context, o harness.Options, name string, rec scenario.EpisodeRecord) (*Episode, error) {
	return replay(ctx, o, name, rec, false)
}

// replay is Replay; showRows has the log carry the key's row between steps
// (when the store can show it), for a demo.
func replay(ctx context.Context, o harness.Options, name string, rec scenario.EpisodeRecord, showRows bool) (*Episode, error) {
	sc, ok := scenario.Lookup(name)
	if !ok || !sc.Scheduled {
		return nil, fmt.Errorf("%q is not a scheduled scenario", name)
	}
	env, err := o.NewEnv(ctx, sc, "replay_"+name, harness.NewRunID(), o.Seed)
	if err != nil {
		return nil, err
	}
	defer env.Store.Close()
	env.SetRound(rec.Round)
	env.UseSchedClock()
	env.SkipClientIDs(rec.FirstClient)
	if rs, ok := env.Store.(stores.RowShower); ok && showRows {
		key := env.Order(rec.Key, "").Key
		env.Observe = func() string { return showRow(ctx, rs, key) }
	}
	stopWatch := history.WatchStalls(env.Hist)
	log, runErr := scenario.RunEpisode(ctx, env, name, rec.Key, &sched.Replay{Choices: rec.Choices})
	j := o.Finish(ctx, env, stopWatch, true, false)
	return &Episode{Hist: env.Hist, Ledger: env.Ledger, Log: log, Checks: j.Checkers, Err: runErr}, nil
}

// DescribeLog prints an episode's log as the hunt's traces do.
func DescribeLog(log []sched.Event) []string { return describeLog(log) }
