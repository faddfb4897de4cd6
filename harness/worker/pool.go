package worker

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
)

// Pool runs orders on worker processes: it replaces each killed worker and
// hands the new one the orders the dead one left unanswered.
type Pool struct {
	ctx      context.Context
	patience time.Duration
	newW     func(ctx context.Context) (*Worker, error)
	fail     func(error)
	mu       sync.Mutex
	live     []*Worker
	starting int  // workers being started
	closing  bool // no more replacements
	wg       sync.WaitGroup
}

// DefaultStartPatience is how long a Pool tries again to start a worker
// whose start failed, unless told otherwise (see Options.StartPatience).
const DefaultStartPatience = time.Minute

// NewPool makes a pool whose workers newW starts (each with a new client
// id); fail hears what went wrong with a worker after it started (it died
// on its own, or could not be replaced). A start that fails is tried
// again for patience (0: DefaultStartPatience). Workers are killed when
// ctx ends.
func NewPool(ctx context.Context, patience time.Duration, newW func(ctx context.Context) (*Worker, error), fail func(error)) *Pool {
	return &Pool{ctx: ctx, patience: cmp.Or(patience, DefaultStartPatience), newW: newW, fail: fail}
}

// Start starts a worker and watches it; it reports a failure to start.
func (p *Pool) Start() (*Worker, error) {
	p.mu.Lock()
	p.starting++
	p.mu.Unlock()
	return p.started()
}

// started starts a worker whose start was already counted in p.starting.
// A start that fails (the server is down, so the store cannot be opened)
// is tried again for the pool's patience, as a supervisor restarts a
// crashed process.
func (p *Pool) started() (*Worker, error) {
	var w *Worker
	var err error
	for end := time.Now().Add(p.patience); ; {
		if w, err = p.newW(p.ctx); err == nil || time.Now().After(end) || p.ctx.Err() != nil {
			break
		}
		_ = faults.Pause(p.ctx, 200*time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting--
	if err != nil {
		return nil, err
	}
	p.live = append(p.live, w)
	p.wg.Add(1)
	go p.watch(w)
	return w, nil
}

// watch waits for a worker to end; a killed one is replaced.
func (p *Pool) watch(w *Worker) {
	defer p.wg.Done()
	<-w.Done()
	p.mu.Lock()
	for i, x := range p.live {
		if x == w {
			p.live = append(p.live[:i], p.live[i+1:]...)
			break
		}
	}
	left := w.Unanswered()
	replace := w.Killed() && !p.closing && p.ctx.Err() == nil && len(left) > 0
	if replace {
		p.starting++ // before unlocking, so CloseAll waits for it
	}
	p.mu.Unlock()
	if err := w.Err(); err != nil {
		p.fail(err)
	}
	if !replace {
		return
	}
	r, err := p.started()
	if err != nil {
		p.fail(fmt.Errorf("replacing killed worker %d: %v", w.ID, err))
		return
	}
	for _, o := range left {
		r.Submit(o)
	}
}

// Victim returns the i-th live worker not already killed (modulo how
// many), or nil: a kill meant for a worker must not land on one that is
// dying from an earlier kill, where it would kill nothing.
func (p *Pool) Victim(i int) *Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ws []*Worker
	for _, w := range p.live {
		if !w.Killed() {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	sort.Slice(ws, func(a, b int) bool { return ws[a].ID < ws[b].ID })
	return ws[i%len(ws)]
}

// CloseAll tells every live worker to finish, and waits for every worker
// (and replacement) to end.
func (p *Pool) CloseAll() {
	for {
		p.mu.Lock()
		p.closing = true
		live := append([]*Worker(nil), p.live...)
		p.mu.Unlock()
		for _, w := range live {
			w.Close()
		}
		for _, w := range live {
			<-w.Done()
		}
		p.mu.Lock()
		n := len(p.live) + p.starting
		p.mu.Unlock()
		if n == 0 {
			break
		}
		if len(live) == 0 {
			time.Sleep(10 * time.Millisecond) // a replacement is starting
		}
	}
	p.wg.Wait()
}

// Idle reports whether no worker has an order left to run and none is
// being started: nothing more will be answered.
func (p *Pool) Idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.starting > 0 {
		return false
	}
	for _, w := range p.live {
		if w.Busy() {
			return false
		}
	}
	return true
}
