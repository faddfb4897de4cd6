package nemesis

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/worker"
	"github.com/idemcheck/idemcheck/stores"
)

// The kinds of a chaos plan's events. In the history, client pauses and
// crashes are recorded as history.FaultPause and FaultCrash, worker kills
// as FaultWorkerKill, server faults as FaultServerPause and
// FaultServerRestart, network windows as history.NetFault(kind).
const (
	ChaosClientPause   = "client-pause"   // a client pauses at a failpoint on an order
	ChaosClientCrash   = "client-crash"   // a client crashes at a failpoint on an order
	ChaosWorkerKill    = "worker-kill"    // a live worker is killed at a moment
	ChaosWorkerKillAt  = "worker-kill-at" // the worker owning an order is killed at a failpoint
	ChaosServerPause   = "server-pause"
	ChaosServerRestart = "server-restart"
	ChaosNet           = "net-" // + a network fault kind (NetKinds)
)

// ChaosEvent is one planned fault.
type ChaosEvent struct {
	Kind string
	// At is when a timed fault starts, from the start of the faults phase.
	At time.Duration
	// For is how long a pause, hold or network fault lasts.
	For time.Duration
	// Slot is the index (among the live workers, by id) of the worker a
	// timed kill hits.
	Slot int
	// Order is the order a fault at a failpoint waits for (its index).
	Order     int
	Failpoint string
}

// String prints the event as the fault schedule lists it.
func (ev ChaosEvent) String() string {
	switch ev.Kind {
	case ChaosClientPause:
		return fmt.Sprintf("the client owning order %d pauses %v at %s", ev.Order, ev.For.Round(time.Millisecond), ev.Failpoint)
	case ChaosClientCrash:
		return fmt.Sprintf("the client owning order %d crashes at %s", ev.Order, ev.Failpoint)
	case ChaosWorkerKillAt:
		return fmt.Sprintf("kill the worker owning order %d at %s", ev.Order, ev.Failpoint)
	case ChaosWorkerKill:
		return fmt.Sprintf("+%v kill live worker #%d", ev.At.Round(time.Millisecond), ev.Slot)
	case ChaosServerPause:
		return fmt.Sprintf("+%v pause the server for %v", ev.At.Round(time.Millisecond), ev.For.Round(time.Millisecond))
	case ChaosServerRestart:
		return fmt.Sprintf("+%v kill the server (SIGKILL) and start it again", ev.At.Round(time.Millisecond))
	}
	return fmt.Sprintf("+%v %s for %v", ev.At.Round(time.Millisecond), ev.Kind, ev.For.Round(time.Millisecond))
}

// ChaosWindow is how long the faults phase lasts, in LockTTLs: long
// enough for every fault ChaosPlan draws to start inside it (the server's
// restart by 0.725 of it plus two LockTTLs), and no longer, since chaos
// is the longest scenario of a check run (at twelve LockTTLs a Redis
// check took 4.9 to 5.1 s, 4.0 s of it chaos).
const ChaosWindow = 10

// ChaosWorkerOrders is the index of the first order the worker processes
// run: theirs alone (each on two workers at once), so that a worker owns
// each of them and a kill planned at a failpoint finds its owner.
const ChaosWorkerOrders = 1000

// ChaosPlan draws the round's fault schedule from r (Rand: the seed and
// the round). It is a pure function of them and of the run's shape
// (LockTTL, client slots), so a failing run is replayed by running it again
// with the same flags: it does not depend on which faults the store allows
// (those not possible are listed as skipped) nor on which other scenarios
// ran.
func ChaosPlan(r *rand.Rand, ttl time.Duration, slots int) []ChaosEvent {
	w := ChaosWindow * ttl
	streams := (slots + 1) / 2
	fps := []string{faults.RunAfterClaim, faults.RunAfterWork}
	dur := func(lo, spread time.Duration) time.Duration { return lo + time.Duration(r.Int63n(int64(spread)+1)) }
	var plan []ChaosEvent
	// Client faults and kills at failpoints each on a distinct order
	// among the very first ones the clients (or the workers) send, before
	// the server and network faults start: a later order may not be
	// reached on a slow machine, and its fault would never fire. Each
	// stream of clients sends its first two orders within the first
	// LockTTL.
	clientOrders := r.Perm(max(4, 2*streams))
	for i := 0; i < 2; i++ {
		plan = append(plan, ChaosEvent{Kind: ChaosClientPause, Order: clientOrders[i], Failpoint: fps[r.Intn(2)], For: dur(2*ttl, ttl)})
	}
	for i := 2; i < 4; i++ {
		plan = append(plan, ChaosEvent{Kind: ChaosClientCrash, Order: clientOrders[i], Failpoint: fps[r.Intn(2)]})
	}
	workerOrders := r.Perm(3)
	for i := 0; i < 2; i++ {
		plan = append(plan, ChaosEvent{Kind: ChaosWorkerKillAt, Order: ChaosWorkerOrders + workerOrders[i], Failpoint: fps[r.Intn(2)]})
	}
	for i := 0; i < 2; i++ {
		plan = append(plan, ChaosEvent{Kind: ChaosWorkerKill, At: dur(0, w), Slot: r.Intn(8)})
	}
	pauseAt := dur(w/10, w/4)
	pauseFor := dur(ttl, ttl)
	plan = append(plan, ChaosEvent{Kind: ChaosServerPause, At: pauseAt, For: pauseFor})
	plan = append(plan, ChaosEvent{Kind: ChaosServerRestart, At: pauseAt + pauseFor + dur(w/8, w/4)})
	// Network faults one after another (healing one heals all), with gaps.
	at := dur(0, w/4)
	for i, n := 0, 2+r.Intn(2); i < n; i++ {
		kind := NetKinds[r.Intn(len(NetKinds))]
		ev := ChaosEvent{Kind: ChaosNet + kind, At: at, For: dur(ttl/2, ttl)}
		plan = append(plan, ev)
		at += ev.For + dur(ttl/2, ttl)
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
	return plan
}

// NetStep is one step of the network nemesis: a fault for a while, then
// a healed gap.
type NetStep struct {
	Kind     string
	On, Heal time.Duration
}

// NetSchedule draws the nemesis's steps from the seed: latency, a reset
// and two lost-reply windows, in a shuffled order. A reset or lost-reply
// window lasts 30-60ms and latency (20±10ms) 150-300ms; after each, the
// network stays healed for LockTTL+50ms plus up to LockTTL/2, so a claim
// orphaned by a lost reply goes stale and is taken over before the next
// fault. (Every call that fails in a window is an unknown outcome the
// linearizability search must place anywhere after its call; the gaps
// keep the number of them on one key small.)
func NetSchedule(r *rand.Rand, ttl time.Duration) []NetStep {
	kinds := []string{NetLatency, NetReset, NetLostReply, NetLostReply}
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var steps []NetStep
	for _, k := range kinds {
		on := 30*time.Millisecond + time.Duration(r.Int63n(int64(30*time.Millisecond)))
		if k == NetLatency {
			on = 150*time.Millisecond + time.Duration(r.Int63n(int64(150*time.Millisecond)))
		}
		heal := ttl + 50*time.Millisecond + time.Duration(r.Int63n(int64(ttl/2)+1))
		steps = append(steps, NetStep{Kind: k, On: on, Heal: heal})
	}
	return steps
}

// KillList arms worker kills at (failpoint, key) pairs: each fires once,
// the first time a worker announces that failpoint on that key.
type KillList struct {
	mu    sync.Mutex
	armed map[string]bool
}

// NewKillList makes an empty kill list.
func NewKillList() *KillList { return &KillList{armed: map[string]bool{}} }

// Arm kills the worker that announces failpoint on key, once.
func (l *KillList) Arm(failpoint string, key stores.KeyRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed[failpoint+"\x00"+key.String()] = true
}

// Decide is a worker.Options.Decide: kill the worker at an armed point.
// It kills w itself, so that a worker already killed (dying from another
// kill, its failpoint still on the way), which this kill would not kill,
// leaves the kill armed for the next worker that reaches the point.
func (l *KillList) Decide(w *worker.Worker, failpoint string, key stores.KeyRef) worker.Action {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := failpoint + "\x00" + key.String()
	if l.armed[id] && (w == nil || w.Kill(failpoint, key)) {
		delete(l.armed, id)
		return worker.Action{Kill: true}
	}
	return worker.Action{}
}

// Unfired lists the armed kills no worker reached, as "failpoint on
// key", sorted: what a round meant to test and did not.
func (l *KillList) Unfired() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var left []string
	for id := range l.armed {
		fp, key, _ := strings.Cut(id, "\x00")
		left = append(left, fp+" on "+key)
	}
	slices.Sort(left)
	return left
}

// WorkerKill is a planned kill of a worker process: at a failpoint on an
// order's key, at the Call-th store call any worker makes (in flight), or
// at a moment (At) after the round began.
type WorkerKill struct {
	Failpoint string
	Order     int
	Call      int
	At        time.Duration
	Victim    int // index among the live workers, for kills at a moment
}

// WorkerKills draws a round's kills from r (Rand: the seed and the
// round), for a round of keys orders whose workers announce failpoints:
// one kill at each failpoint, on distinct orders, two in flight, and two
// at random moments.
func WorkerKills(r *rand.Rand, keys int, failpoints []string) []WorkerKill {
	var plan []WorkerKill
	perm := r.Perm(keys)
	for i, fp := range failpoints {
		plan = append(plan, WorkerKill{Failpoint: fp, Order: perm[i%len(perm)]})
	}
	// In flight: two distinct calls among the first ones of the round.
	c1 := 1 + r.Intn(2*keys)
	c2 := c1 + 1 + r.Intn(2*keys)
	plan = append(plan, WorkerKill{Call: c1}, WorkerKill{Call: c2})
	for i := 0; i < 2; i++ {
		plan = append(plan, WorkerKill{At: time.Duration(20+r.Intn(200)) * time.Millisecond, Victim: r.Intn(8)})
	}
	return plan
}
