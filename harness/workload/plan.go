package workload

import (
	"context"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/stores"
)

// Action is what a rule does at its failpoint.
type Action struct {
	Kind  history.FaultKind // history.FaultPause or history.FaultCrash
	Pause time.Duration     // for a pause
	// Until, when set, lengthens a pause past Pause until it reports true
	// (polled every millisecond or so), for at most Longest in all: a
	// pause that must outlast an event, not a guess at how long it takes.
	Until   func() bool
	Longest time.Duration
}

// PauseFor pauses the client for d: a GC pause, a stalled disk.
func PauseFor(d time.Duration) Action { return Action{Kind: history.FaultPause, Pause: d} }

// PauseUntil pauses the client for at least d, and then until until()
// reports true, for at most longest in all. A pause that must outlast
// something another client does (a takeover of the paused owner's claim)
// waits for it, where a fixed pause could end first on a loaded machine.
func PauseUntil(d, longest time.Duration, until func() bool) Action {
	return Action{Kind: history.FaultPause, Pause: d, Until: until, Longest: longest}
}

// Crash stops the client at the failpoint; it cleans nothing up.
func Crash() Action { return Action{Kind: history.FaultCrash} }

// Rule arms one failpoint.
type Rule struct {
	Failpoint string
	Action    Action
	// Times is how many hits trigger the action; 0 means every hit.
	Times int
	// Key limits the rule to one key (zero: any key).
	Key stores.KeyRef
}

// Plan is a set of armed failpoints. Its handlers (For) pause or crash
// the client that reaches an armed failpoint and record the fault in the
// history. Clients that share a plan share its rules' counts: a rule with
// Times 1 fires once, in whichever client reaches it first (the chaos
// scenario arms a fault on a key this way, for whichever client owns it).
type Plan struct {
	hist  *history.History
	mu    sync.Mutex
	rules []Rule
	fired []int
}

// NewPlan arms the rules; faults are recorded in h.
func NewPlan(h *history.History, rules ...Rule) *Plan {
	return &Plan{hist: h, rules: rules, fired: make([]int, len(rules))}
}

// For returns the failpoint handler of one client under the plan.
func (p *Plan) For(client int) faults.Handler {
	return faults.HandlerFunc(func(ctx context.Context, name string) error { return p.hit(ctx, client, name) })
}

type keyCtx struct{}

// WithKey tells failpoint handlers which key the client is working on.
func WithKey(ctx context.Context, k stores.KeyRef) context.Context {
	return context.WithValue(ctx, keyCtx{}, k)
}

// KeyOf is the key the client at a failpoint is working on (zero if none).
func KeyOf(ctx context.Context) stores.KeyRef {
	k, _ := ctx.Value(keyCtx{}).(stores.KeyRef)
	return k
}

// Unfired lists the rules that have not fired yet: a fault planned that
// no client with the plan reached (its order's work ran elsewhere, or not
// yet), which a scenario says rather than leaves unsaid.
func (p *Plan) Unfired() []Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Rule
	for i, r := range p.rules {
		if p.fired[i] == 0 {
			out = append(out, r)
		}
	}
	return out
}

// hit applies the first armed rule for the failpoint, if any.
func (p *Plan) hit(ctx context.Context, client int, name string) error {
	key := KeyOf(ctx)
	p.mu.Lock()
	var act *Action
	for i, r := range p.rules {
		if r.Failpoint != name || (r.Key != (stores.KeyRef{}) && r.Key != key) {
			continue
		}
		if r.Times > 0 && p.fired[i] >= r.Times {
			continue
		}
		p.fired[i]++
		a := r.Action
		act = &a
		break
	}
	p.mu.Unlock()
	if act == nil {
		return nil
	}
	f := history.Fault{Client: client, Key: key, Kind: act.Kind, Failpoint: name, Start: p.hist.Now()}
	if act.Kind == history.FaultCrash {
		f.End = f.Start
		p.hist.AddFault(f)
		return faults.ErrCrashed
	}
	var err error
	if act.Until != nil {
		err = faults.PauseUntil(ctx, act.Pause, act.Longest, time.Millisecond, act.Until)
	} else {
		err = faults.Pause(ctx, act.Pause)
	}
	f.End = p.hist.Now()
	p.hist.AddFault(f)
	return err
}
