package harness

import (
	"context"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Action is what a rule does at its failpoint.
type Action struct {
	Kind  string        // "pause" or "crash"
	Pause time.Duration // for "pause"
}

// PauseFor pauses the client for d: a GC pause, a stalled disk.
func PauseFor(d time.Duration) Action { return Action{Kind: "pause", Pause: d} }

// Crash stops the client at the failpoint; it cleans nothing up.
func Crash() Action { return Action{Kind: "crash"} }

// Rule arms one failpoint for one client.
type Rule struct {
	Failpoint string
	Action    Action
	// Times is how many hits trigger the action; 0 means every hit.
	Times int
	// Key limits the rule to one key (zero: any key).
	Key stores.KeyRef
}

// Plan is a client's armed failpoints: a faults.Handler that records each
// fault it injects in the history.
type Plan struct {
	Client int
	Hist   *History
	mu     sync.Mutex
	rules  []Rule
	fired  []int
}

// NewPlan arms the rules for one client.
func NewPlan(client int, h *History, rules ...Rule) *Plan {
	return &Plan{Client: client, Hist: h, rules: rules, fired: make([]int, len(rules))}
}

type keyCtx struct{}

// withKey tells failpoint handlers which key the client is working on.
func withKey(ctx context.Context, k stores.KeyRef) context.Context {
	return context.WithValue(ctx, keyCtx{}, k)
}

func keyOf(ctx context.Context) stores.KeyRef {
	k, _ := ctx.Value(keyCtx{}).(stores.KeyRef)
	return k
}

// Hit applies the first armed rule for the failpoint, if any.
func (p *Plan) Hit(ctx context.Context, name string) error {
	if p == nil {
		return nil
	}
	key := keyOf(ctx)
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
	f := Fault{Client: p.Client, Key: key, Kind: act.Kind, Failpoint: name, Start: p.Hist.Now()}
	if act.Kind == "crash" {
		f.End = f.Start
		p.Hist.AddFault(f)
		return faults.ErrCrashed
	}
	err := faults.Pause(ctx, act.Pause)
	f.End = p.Hist.Now()
	p.Hist.AddFault(f)
	return err
}
