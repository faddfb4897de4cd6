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

	underLoad(ctx, env, func(*load) bool {
		begun := time.Now()
		if faults.Pause(ctx, time.Until(begun.Add(pauseAt))) != nil {
			return false
		}
		if err := nemesis.PauseServer(ctx, env.Hist, sf, pauseFor); err != nil {
			env.Fail("%v", err)
			return false
		}
		if faults.Pause(ctx, time.Until(begun.Add(restartAt))) != nil {
			return false
		}
		if err := nemesis.RestartServer(ctx, env.Hist, sf); err != nil {
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
		sayUnmetServerFaults(env, "store-faults")
	}
}

// sayUnmetServerFaults records a note (Env.NotTested) of scenario for
// each server pause or restart in env's history during which no store
// call was in flight: the server was paused or down, and no call met it.
// It is asked once the load has ended (the calls in flight then have
// returned or failed). Calls moved to disk (a run past its memory) are
// not looked at, so then it says nothing.
func sayUnmetServerFaults(env *Env, scenario string) {
	if env.Hist.Spilled() {
		return
	}
	for _, f := range env.Hist.Faults() {
		what := map[history.FaultKind]string{history.FaultServerPause: "paused", history.FaultServerRestart: "down for its restart"}[f.Kind]
		if what == "" {
			continue
		}
		met := env.Hist.Has(func(op history.Op) bool {
			return op.Call <= f.End && (op.Return == history.Never || op.Return >= f.Start)
		})
		if !met {
			env.NotTested("%s: no store call was in flight while the server was %s (%v), so what a client meets then was not tested",
				scenario, what, time.Duration(f.End-f.Start).Round(time.Millisecond))
		}
	}
}
