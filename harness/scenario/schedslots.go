package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/idemcheck/idemcheck/internal/pool"
	"github.com/idemcheck/idemcheck/stores"
)

// How a scheduled scenario's episodes are run: one after another, or in
// slots side by side on a server-clock store, and how long each ran of
// real time between the clock's ticks there.

// episodes is the run of a scheduled scenario: one episode per key, each
// with a seeded PRNG chooser, then the clock moved far enough that the
// runner's final probe finds every claim stale.
//
// On a caller-clock store the episodes run one after another: they share
// the manual clock, and one episode's tick would move another's. On a
// server-clock store a tick is a real wait, which moves only the leases
// its own episode took (every other episode's claims are its own keys',
// and their expiry is judged from when they were made), so the episodes
// may run in a few slots at once (episodeSlots), each slot running its
// keys one after another on a store of its own: each episode with its own
// client ids and chooser seed, drawn in key order before any starts, so
// the seed gives every episode the choices it would one at a time. A slot
// has a store of its own (the first the run's, the others opened by
// Caps.OpenAt): a client parked at a failpoint may hold a connection of
// its pool (Postgres yields inside pgx's query tracer), and episodes that
// shared one pool could starve each other. A store opened without an
// address (a factory without OpenAt) runs its episodes one at a time. The
// prunes of sched-race and sched-retention remove only keys past the run's
// retention, which no episode reaches.
func episodes(name string) func(ctx context.Context, env *Env) {
	return func(ctx context.Context, env *Env) {
		env.UseSchedClock()
		slots := 1
		if env.ServerClock() && env.setup.OpenAt != nil && env.setup.Addr != "" {
			slots = episodeSlots(episodeSpecs[name], env.Keys, env.Config.LockTTL)
		}
		if slots > 1 {
			slottedEpisodes(ctx, env, name, slots)
		} else {
			if env.ServerClock() {
				warmPool(ctx, env, env.Store, episodeIDs(name)) // see slottedEpisodes
			}
			for k := 0; k < env.Keys && ctx.Err() == nil; k++ {
				first := env.nextClientID()
				env.recordEpisode(name, runRecorded(ctx, env, name, k, env.Int63(), first))
			}
		}
		env.afterEpisodes()
		if name == "sched-takeover" && ctx.Err() == nil && !tookOver(env.Hist.Ops()) {
			env.NotTested("sched-takeover: no Begin took a stale claim over in any episode (the seed's schedules let no claim go stale under a live owner): the fencing of stale owners was not tested (other seeds, or more --keys, do)")
		}
	}
}

// slottedEpisodes runs the keys' episodes in slots at once (see episodes):
// slot i runs keys i, i+slots, … one after another, slot 0 on the run's
// store and every other on a store it opens when it starts and closes when
// it ends. A slot whose store cannot be opened runs its keys after the
// others, one at a time on the run's store, and a note says so: a harness
// short of connections must not read as a store's fault.
func slottedEpisodes(ctx context.Context, env *Env, name string, slots int) {
	stride := episodeIDs(name)
	base := env.nextClientID()
	type start struct {
		env   *Env
		first int
		seed  int64
	}
	starts := make([]start, env.Keys)
	for k := range starts {
		first := base + k*stride
		starts[k] = start{env: env.episodeEnv(first, env.Int63()), first: first, seed: env.Int63()}
	}
	env.SkipClientIDs(base + env.Keys*stride)
	recs := make([]EpisodeRecord, env.Keys)
	unopened := make([]bool, slots)
	run := func(k int, store stores.Store) {
		st := starts[k]
		st.env.Store = store
		recs[k] = runRecorded(ctx, st.env, name, k, st.seed, st.first)
		if used := st.env.nextClientID() - st.first; used > stride && recs[k].Err == "" {
			recs[k].Err = fmt.Sprintf("the episode used %d client ids, more than the %d it was given", used, stride)
		}
	}
	// Every slot's store is opened and warmed before any episode starts:
	// a store's first calls open its sessions (a Postgres session is a
	// forked backend, about 30 ms of CPU here), and an episode that made
	// them, or ran beside another slot making them, ran 40 to 100 ms of
	// real time between two ticks where a warm one ran 2 to 15 ms.
	slotStores := make([]stores.Store, slots)
	slotStores[0] = env.Store
	pool.Each(slots, slots, func(slot int) error {
		if slot > 0 {
			store, err := env.setup.OpenAt(ctx, env.setup.Addr, env.Config)
			if err != nil {
				env.Note("%s: the episodes of slot %d run after the others, on the run's store: another connection to the store: %v", env.Tenant, slot, err)
				unopened[slot] = true
				return nil
			}
			slotStores[slot] = store
		}
		warmPool(ctx, env, slotStores[slot], stride)
		return nil
	})
	pool.Each(slots, slots, func(slot int) error {
		store := slotStores[slot]
		if store == nil {
			return nil
		}
		if slot > 0 {
			defer store.Close()
			defer env.keepDeaths(store)
		}
		for k := slot; k < env.Keys && ctx.Err() == nil; k += slots {
			run(k, store)
		}
		return nil
	})
	for slot, skipped := range unopened {
		for k := slot; skipped && k < env.Keys && ctx.Err() == nil; k += slots {
			run(k, env.Store)
		}
	}
	for _, er := range recs {
		if er.Order != "" { // not interrupted before it started
			env.recordEpisode(name, er)
		}
	}
}

// episodeSlots is how many of a scheduled scenario's episodes run at once
// on a server-clock store: enough that each slot's share of the ticks,
// waited out one episode after another, takes about slotTicks; at most
// EpisodesAtOnce and the keys; 1 for a scenario without ticks. Few slots
// keep each episode's real time between ticks short: every other slot
// opens a store of its own, whose first episode opens its sessions, and
// the slots share the machine (Postgres, an episode on a warm store: 2 to
// 6 ms; 8 at once, each on a new store, on 2 cores: 50 to 700 ms). Past
// LockTTL, a claim goes stale by the server's clock instead of a tick,
// and the seed no longer fixes the interleaving (ClockOutran says so). A
// function of the scenario, --keys and LockTTL alone, so the seed fixes
// it too.
func episodeSlots(spec episodeSpec, keys int, lockTTL time.Duration) int {
	ticks := spec.ticks
	if spec.staleFirst {
		ticks++
	}
	waits := time.Duration(keys*ticks) * (lockTTL + tickMargin)
	return max(1, min(int((waits+slotTicks-1)/slotTicks), EpisodesAtOnce, keys))
}

// slotTicks is about how long one slot's ticks take (episodeSlots).
const slotTicks = time.Second

// EpisodesAtOnce bounds the slots of the scheduled scenarios that run at
// once on a server-clock store: one scenario's (episodeSlots), and the
// runner's sum over those it runs side by side (Scenario.Slots). Each
// slot holds a store of its own, and so connections to the server (a
// client parked at a failpoint keeps one): every key's episode at once,
// at 200 keys and four scenarios side by side, met Postgres's "too many
// clients already" (SQLSTATE 53300), and the refused calls read as a
// liveness failure of a correct store.
const EpisodesAtOnce = 8

// Slots is how many episodes of the scheduled scenario s run at once on a
// server-clock store with this many keys and this LockTTL (episodeSlots);
// 0 for a scenario that is not scheduled. The runner runs scheduled
// scenarios side by side there while their slots add up to at most
// EpisodesAtOnce: most of an episode's time is its ticks' waits, and the
// slots of several scenarios load the server and the machine no more than
// as many slots of one.
func (s Scenario) Slots(keys int, lockTTL time.Duration) int {
	if !s.Scheduled {
		return 0
	}
	return episodeSlots(episodeSpecs[s.Name], keys, lockTTL)
}

// untickedClock measures the longest stretch of an episode's real time
// between two of the clock's ticks (or the episode's start or end) on a
// server-clock store. There a claim goes stale by the server's clock, not
// by the scheduler's ticks: a stretch shorter than LockTTL lets no claim
// made in it go stale before the next tick, so the seed alone fixes the
// interleaving; a longer one (a loaded machine, a slow server) may let
// one go stale by itself, and the interleaving is the machine's as well
// (ClockOutran). Only the episode's goroutine uses it: the scheduler runs
// its actions there.
type untickedClock struct {
	from    time.Time
	longest time.Duration
}

// tick ends a stretch, waits d (a tick), and starts the next one. A nil
// clock only waits.
func (u *untickedClock) tick(d time.Duration) {
	if u == nil {
		time.Sleep(d)
		return
	}
	u.longest = max(u.longest, time.Since(u.from))
	time.Sleep(d)
	u.from = time.Now()
}

// MeasureUnticked measures, on a server-clock store, the longest stretch
// of real time between the clock's ticks of a scheduled run outside an
// episode (a demo), as an episode's record does (EpisodeRecord.Unticked);
// the function it returns ends the measure and gives the stretch (0 on a
// store whose clock is the harness's).
func (e *Env) MeasureUnticked() func() time.Duration {
	if !e.ServerClock() {
		return func() time.Duration { return 0 }
	}
	e.unticked = &untickedClock{from: time.Now()}
	return func() time.Duration {
		d := e.unticked.end()
		e.unticked = nil
		return d
	}
}

// end ends the last stretch and returns the longest; 0 for a nil clock.
func (u *untickedClock) end() time.Duration {
	if u == nil {
		return 0
	}
	u.longest = max(u.longest, time.Since(u.from))
	return u.longest
}
