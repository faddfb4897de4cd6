package httpload

import (
	"container/heap"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
)

// probePause is the pause between two probes of one key that got an
// answer saying nothing yet (409, 423, a 5xx, no answer).
const probePause = 100 * time.Millisecond

// probeWorkers bounds the probes in flight at once.
const probeWorkers = 16

// Probe re-sends, once every fault has healed, each key whose last answer
// was not definite (no answer, 409, 423, 429, 5xx), with its original
// body, until a definite answer ([history.Final]), the same 5xx twice in
// a row (a saved error replayed: the liveness checker asks the ledger
// whether the provider failed that order), or settle has passed: the
// liveness checker reads the last probe of each key. A 5xx that a
// limiter or a gateway gives too ([history.TryAgain]: nginx's limit_req
// answers 503) ends the probes only once it has lasted a second, and
// the pause after it doubles (up to a second; as long as the answer's
// Retry-After asks, whole), so that a limiter lets the probes through.
// A 5xx with a Retry-After never ends them: it asks for a later try; nor
// does a gateway's 502 or 504: the instance behind it may come back.
//
// A settled key that was contested (two of its requests may have been in
// the service at once) is read back once, as a replay
// ([history.PurposeReplay]), beside the probes: an owner that lost its
// claim and saved over the key's answer after it was given (an unfenced
// save) shows only to a later request, and the replay-fidelity checker
// compares it with the key's first success. The count returned is of the
// keys probed, not of those read back.
//
// The keys take turns, the one due soonest first: every key is probed
// from the start of settle to its end, however many there are. Probing
// them one after the other would leave the last keys one probe at the
// very end, the service perhaps still draining what the load left it,
// and a 409 then is no evidence that the key is stuck.
//
// While some key's last probe was refused ([history.TryAgain]), a fresh
// key goes out now and then beside the probes (sendFresh).
func (l *Load) Probe(ctx context.Context, settle time.Duration) int {
	l.mu.Lock()
	var todo, readBack []*keyState
	for _, ks := range l.keys {
		switch {
		case !ks.settled:
			todo = append(todo, ks)
		case ks.contested:
			readBack = append(readBack, ks)
		}
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	q := newProbeQueue(len(todo) + len(readBack))
	for i, ks := range todo {
		q.push(&probing{ks: ks, target: i, pause: probePause})
	}
	for i, ks := range readBack {
		q.push(&probing{ks: ks, target: len(todo) + i, readBack: true})
	}
	var refusing atomic.Int64 // keys whose last probe was refused, not over
	var wg sync.WaitGroup
	for range min(probeWorkers, len(todo)+len(readBack)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p := q.next(ctx)
				if p == nil {
					return
				}
				was := p.refused
				over := l.probeOnce(ctx, p)
				p.refused = p.refused && !over
				switch {
				case p.refused && !was:
					refusing.Add(1)
				case was && !p.refused:
					refusing.Add(-1)
				}
				if over {
					q.done()
				} else {
					q.push(p)
				}
			}
		}()
	}
	freshCtx, stopFresh := context.WithCancel(ctx)
	fresh := make(chan struct{})
	go func() {
		defer close(fresh)
		l.sendFresh(freshCtx, &refusing)
	}()
	wg.Wait()
	stopFresh()
	<-fresh
	return len(todo)
}

// freshEvery is how often the final probes send a fresh key
// ([history.PurposeFresh]) while some probed key is refused: each is a
// new order the service charges, and one answered beside a key's
// refusals in a row is enough to tell them the key's own.
const freshEvery = time.Second

// sendFresh sends, every freshEvery while refusing is above zero, a new
// key for a new order to the next target, until ctx ends: the liveness
// checker asks whether the service answered fresh keys while a probed
// key was refused. A limiter refuses them too; a claim never released
// refuses its key alone (a stuck key answered 429 was left unjudged as
// a limiter's, however long past the declared in-flight TTL).
func (l *Load) sendFresh(ctx context.Context, refusing *atomic.Int64) {
	keys := newKeys(l.cfg.Request.KeyFormat, l.cfg.RunID, l.cfg.Seed, -1, &l.seq)
	t := time.NewTicker(freshEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if refusing.Load() == 0 {
			continue
		}
		n := int(l.fresh.Add(1))
		order := fmt.Sprintf("%s-fresh-o%d", l.cfg.RunID, n)
		body, err := l.cfg.Request.body(order, 100+n%900)
		if err != nil { // Normalize built one: cannot happen
			panic(err)
		}
		target := l.cfg.Targets[n%len(l.cfg.Targets)]
		l.send(ctx, -1, target, history.PurposeFresh, l.freshKey(keys), true, order, body, 1)
	}
}

// probing is one key's probes so far.
type probing struct {
	ks        *keyState
	attempt   int // probes sent
	target    int // the next probe's target, by index
	prev      history.Exchange
	sameSince time.Time
	pause     time.Duration
	due       time.Time // when the next probe may go
	refused   bool      // its last probe was answered [history.TryAgain]
	readBack  bool      // a settled key read back once, not probed (see [Load.Probe])
}

// probeOnce sends p's next probe and says whether the key's probes are
// over (see [Load.Probe]); if not, it sets when the next may go.
func (l *Load) probeOnce(ctx context.Context, p *probing) bool {
	p.attempt++
	t := l.cfg.Targets[p.target%len(l.cfg.Targets)]
	p.target++
	if p.readBack {
		l.send(ctx, -1, t, history.PurposeReplay, p.ks.key, true, p.ks.order, p.ks.body, p.attempt)
		return true
	}
	x, wait := l.send(ctx, -1, t, history.PurposeProbe, p.ks.key, true, p.ks.order, p.ks.body, p.attempt)
	p.refused = x.Answered() && history.TryAgain(x.Status)
	if history.Final(x.Status) || ctx.Err() != nil {
		return true
	}
	same := x.Status >= 500 && x.Status == p.prev.Status && x.Reply == p.prev.Reply
	if !same {
		p.sameSince = time.Now()
	}
	// A 5xx asking to be tried later (Retry-After) is the service's own
	// word that the key has no answer yet, however often it repeats: the
	// probes go on, as they do on a 409, until settle ends them. So do a
	// gateway's 502 and 504: the instance behind it is away, and may come
	// back (one restarting behind a proxy answered a key's probes 502 for
	// a second, while the fresh keys got the others, and the key's saved
	// success was taken for lost).
	if same && x.RetryAfter == 0 && x.Status != http.StatusBadGateway && x.Status != http.StatusGatewayTimeout &&
		(!history.TryAgain(x.Status) || time.Since(p.sameSince) >= history.RefusalLasts) {
		return true
	}
	p.prev = x
	if history.TryAgain(x.Status) {
		p.pause = min(2*p.pause, time.Second)
	} else {
		p.pause = probePause
	}
	// The answer's Retry-After is honoured whole (the load's clients cap
	// it at maxRetryAfter): a limiter that goes by the key refuses a
	// retry sent sooner, and refusals so provoked were taken for the
	// key's own. A wait past settle ends the key's probes; its last
	// probe says what it asked.
	p.due = time.Now().Add(max(p.pause, wait))
	return false
}

// probeQueue hands out the keys still to probe, the one due soonest
// first, and waits for it to be due.
type probeQueue struct {
	mu      sync.Mutex
	h       probeHeap
	pending int // keys not yet over, in the queue or being probed
	changed chan struct{}
}

func newProbeQueue(n int) *probeQueue {
	return &probeQueue{h: make(probeHeap, 0, n), changed: make(chan struct{}, 1)}
}

// push queues p (a new key, or one probed and not over).
func (q *probeQueue) push(p *probing) {
	q.mu.Lock()
	if p.attempt == 0 {
		q.pending++
	}
	heap.Push(&q.h, p)
	q.mu.Unlock()
	q.signal()
}

// done says a key taken from the queue is over.
func (q *probeQueue) done() {
	q.mu.Lock()
	q.pending--
	q.mu.Unlock()
	q.signal()
}

func (q *probeQueue) signal() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

// next waits for the key due soonest and takes it from the queue; nil
// once every key is over or ctx is done.
func (q *probeQueue) next(ctx context.Context) *probing {
	for {
		q.mu.Lock()
		if q.pending == 0 || ctx.Err() != nil {
			q.mu.Unlock()
			q.signal() // wake the next waiter to see it too
			return nil
		}
		// Every key is being probed: look again soon (a signal may have
		// woken another waiter), or when one is back.
		wait := probePause / 4
		if len(q.h) > 0 {
			if wait = time.Until(q.h[0].due); wait <= 0 {
				p := heap.Pop(&q.h).(*probing)
				q.mu.Unlock()
				return p
			}
		}
		q.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-q.changed:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// probeHeap orders the keys by when their next probe is due.
type probeHeap []*probing

func (h probeHeap) Len() int           { return len(h) }
func (h probeHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h probeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *probeHeap) Push(x any)        { *h = append(*h, x.(*probing)) }
func (h *probeHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	return p
}
