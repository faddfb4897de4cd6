package scenario

import (
	"context"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// runStoreFaults: clients send paced orders while the server is paused
// (longer than LockTTL, so claims go stale while it is frozen), then killed
// with SIGKILL and started again. Calls during the outages end without an
// answer (unknown outcomes) or fail before reaching the server (left out),
// and clients retry or give up. Once the server is healed, every order is
// sent again until it has an answer: a claim or a saved answer that the
// restart lost shows as a fresh claim of a key that existed.
func runStoreFaults(ctx context.Context, env *Env) {
	sf := env.Server()
	if sf == nil {
		env.Fail("%s", ServerSkip(env.Caps()))
		return
	}
	ttl := env.Config.LockTTL
	r := env.PlanRand("store-faults")
	jitter := func(d time.Duration) time.Duration { return time.Duration(r.Int63n(int64(d) + 1)) }
	pauseAt := ttl + jitter(ttl)
	pauseFor := 2*ttl + jitter(ttl)
	restartAt := pauseAt + pauseFor + ttl + jitter(ttl)
	env.Note("%s: +%v pause the %s server for %v", env.Tenant, pauseAt.Round(time.Millisecond), sf.Kind(), pauseFor.Round(time.Millisecond))
	env.Note("%s: +%v kill the %s server (SIGKILL) and start it again", env.Tenant, restartAt.Round(time.Millisecond), sf.Kind())

	var paused, restarted serverWindow
	underLoad(ctx, env, func(*load) bool {
		begun := time.Now()
		if faults.Pause(ctx, time.Until(begun.Add(pauseAt))) != nil {
			return false
		}
		paused.open(env)
		err := nemesis.PauseServer(ctx, env.Hist, sf, pauseFor)
		paused.close(env)
		if err != nil {
			env.Fail("%v", err)
			return false
		}
		if faults.Pause(ctx, time.Until(begun.Add(restartAt))) != nil {
			return false
		}
		restarted.open(env)
		err = nemesis.RestartServer(ctx, env.Hist, sf)
		restarted.close(env)
		if err != nil {
			env.Fail("%v", err)
			return false
		}
		return true
	}, func() {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if err := sf.Heal(hctx); err != nil {
			env.Fail("healing the server: %v", err)
		}
	})
	if ctx.Err() == nil {
		paused.say(env, "store-faults", "paused")
		restarted.say(env, "store-faults", "down for its restart")
	}
}

// serverWindow is a server fault's window in history time, and the place
// in the recorded calls where it opened: the calls in flight during it
// returned (or failed) after it opened.
type serverWindow struct {
	mark       history.Mark
	start, end int64
}

func (w *serverWindow) open(env *Env) { w.mark, w.start = env.Hist.Mark(), env.Hist.Now() }

func (w *serverWindow) close(env *Env) { w.end = env.Hist.Now() }

// say records a note (Env.NotTested) of scenario when no store call was
// in flight during the window that opened: the server was what, and no
// call met it. It is asked once the calls in flight then have returned
// (the load ended). Calls moved to disk (a run past its memory) are not
// looked at, so then it says nothing.
func (w *serverWindow) say(env *Env, scenario, what string) {
	if w.end == 0 || env.Hist.Spilled() {
		return
	}
	met := env.Hist.HasSince(w.mark, func(op history.Op) bool {
		return op.Call <= w.end && (op.Return == history.Never || op.Return >= w.start)
	})
	if !met {
		env.NotTested("%s: no store call was in flight while the server was %s (%v), so what a client meets then was not tested",
			scenario, what, time.Duration(w.end-w.start).Round(time.Millisecond))
	}
}
