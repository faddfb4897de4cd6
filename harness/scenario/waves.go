package scenario

import (
	"context"
	"time"
)

// How the scenarios whose clients must meet in the store (a second
// client answered while the first one's claim is live: skew, mismatch)
// size the waves of keys they run at once, so that a store too slow for
// every key at once still meets them.

// meetingWave is how many of env's keys a meeting scenario runs at once.
// It times a warm batch of perKey claims a key (up to warmAtOnce at once,
// each released; a smaller batch stands for every key's at the pace it
// was answered), run twice, the second timed: the first opens a pool's
// sessions, which cost once. budget is how long an owner waits for the
// others; the calls that must meet in it are about perKey a key, half the
// batch's claims and releases, a margin of two. Every key at once when
// the store answered every key's batch within budget; else as many keys
// as it answered in budget, in at most maxMeetingWaves waves; and every
// key at once again when not one key's calls fit, since waves would meet
// no one either. All at once, a slow store answers the late clients after
// the owner has saved, and the scenario tests nothing: the JavaScript
// example at --keys 200 answered in 3.8 s (median), where an owner waits
// half a LockTTL for the others, and every order went untested.
func meetingWave(ctx context.Context, env *Env, perKey int, budget time.Duration) int {
	all := perKey * env.Keys
	calls := min(all, warmAtOnce)
	warmPool(ctx, env, env.Store, calls)
	start := time.Now()
	warmPool(ctx, env, env.Store, calls)
	took := time.Since(start)
	// A batch smaller than every key's calls (warmAtOnce) stands for them
	// at the pace it was answered.
	if float64(took)*float64(all)/float64(calls) <= float64(budget) {
		return env.Keys
	}
	keys := float64(calls) / float64(perKey) * float64(budget) / float64(took)
	if keys < 1 {
		// Not one key's calls in budget: waves would not meet either,
		// only make the scenario long (its notes say what went untested).
		return env.Keys
	}
	return min(env.Keys, max(int(keys), (env.Keys+maxMeetingWaves-1)/maxMeetingWaves, 1))
}

// maxMeetingWaves bounds a meeting scenario's waves, and so its time: at
// 10,000 keys, a wave a key would take hours; past it, the keys of a
// wave that met too late are said in the scenario's note.
const maxMeetingWaves = 16

// inWaves calls f(k) for every k in [0, n), wave keys at once, a wave
// after the one before has ended; it stops between waves once ctx ends.
func inWaves(ctx context.Context, n, wave int, f func(k int)) {
	wave = max(wave, 1)
	for first := 0; first < n && ctx.Err() == nil; first += wave {
		parallel(min(wave, n-first), func(i int) { f(first + i) })
	}
}
