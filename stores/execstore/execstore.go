package execstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// Timeouts of the process's life. A call itself has no timeout of ours:
// the caller's context bounds it (the harness gives every call one).
const (
	// HelloTimeout bounds how long a started store may take to say hello:
	// long, since a loaded machine starting several interpreters at once
	// (a scenario opens a store per proxy, the workers one each) took
	// more than 20 s for one Python store that imports its Redis client.
	HelloTimeout = 60 * time.Second
	// OpenTimeout bounds the open request (a store connecting to its
	// database, creating its table).
	OpenTimeout = 60 * time.Second
	// CloseTimeout is how long a closed store may take to exit on its own
	// before it is killed.
	CloseTimeout = 5 * time.Second
	// UnansweredAfter, plus four LockTTLs, bounds how long the store may
	// hold a request without answering it while idemcheck holds nothing
	// of it (a failpoint's hit waiting on the scheduler is not counted):
	// then the call ends with an error wrapping stores.ErrUnanswered, an
	// unknown outcome. Far past any call of a working store (a server
	// paused for two LockTTLs, a duplicate waiting out its owner's lease),
	// it ends a wait on a request the store lost, which a scenario
	// without a call deadline of its own waited on for as long as it was
	// let (ten minutes, until a timeout killed the run).
	UnansweredAfter = time.Minute
)

// ErrProtocol is wrapped by every error that says the store broke the
// protocol (a line that is not JSON, an unknown field, an answer to no
// request): one line that names the line.
var ErrProtocol = errors.New("protocol error")

// ErrDied is wrapped by the error of a call whose process died (or was
// killed at another call's crash) before it answered: an unknown outcome.
// A death that was not the harness's crash wraps [stores.ErrProcessDied]
// too.
var ErrDied = errors.New("the store process died before it answered")

// Command is a store's command line, with the hello it answered: what
// Backend and Open need. Make one with Probe.
type Command struct {
	// Line is the command line that starts the store: run directly when
	// it is plain words, else with sh -c (start such a line's program with
	// exec, so that it is the store's process).
	Line string
	// Env is added to the store process's environment.
	Env []string
	// Hello is what the store declared.
	Hello Hello
	// Stderr, if set, gets the store processes' stderr (else it is kept,
	// the last lines of it, for the errors that say why a process died).
	Stderr io.Writer
	// Unanswered, if set, replaces the bound of a request the store holds
	// without an answer (UnansweredAfter; tests shorten it).
	Unanswered time.Duration

	fatalMu sync.Mutex
	fatal   error
	onFatal func(error)
}

// Probe starts the store once, reads its hello, and stops it.
func Probe(ctx context.Context, line string, env []string) (*Command, error) {
	c := &Command{Line: line, Env: env}
	p, err := c.start(ctx, "", nil, nil)
	if err != nil {
		return nil, err
	}
	c.Hello = p.hello
	p.close()
	return c, nil
}

// OnFatal sets f to hear the first protocol error of any of the command's
// processes (once): a CLI cancels its run there, since a store that
// breaks the protocol cannot be judged.
// It is guarded by the same lock as the error: the reader of a process
// Probe started may still be reading when the CLI sets f.
func (c *Command) OnFatal(f func(error)) {
	c.fatalMu.Lock()
	defer c.fatalMu.Unlock()
	c.onFatal = f
}

// Fatal returns the first protocol error any of the command's processes
// made, or nil.
func (c *Command) Fatal() error {
	c.fatalMu.Lock()
	defer c.fatalMu.Unlock()
	return c.fatal
}

func (c *Command) setFatal(err error) {
	c.fatalMu.Lock()
	first := c.fatal == nil
	if first {
		c.fatal = err
	}
	onFatal := c.onFatal
	c.fatalMu.Unlock()
	if first && onFatal != nil {
		onFatal(err)
	}
}

// Name is the backend name of the command's store: "exec", or
// "exec-redis" and "exec-postgres" for a store that needs that server
// (ServerKind reads it back).
func (c *Command) Name() string {
	if c.Hello.Server != "" {
		return "exec-" + c.Hello.Server
	}
	return "exec"
}

// ServerKind is the server a backend named by Command.Name needs, or "".
func ServerKind(backend string) string {
	k, _ := strings.CutPrefix(backend, "exec-")
	if k == backend {
		return ""
	}
	return k
}

// Backend is the store as a harness backend: its declarations from the
// hello, and Open starting one process per store.
func (c *Command) Backend() stores.Backend {
	h := c.Hello
	b := stores.Backend{
		Name:           c.Name(),
		Clock:          stores.ClockSource(h.Clock),
		Lives:          h.lives(),
		Failpoints:     h.Points,
		WaitsAnnounced: h.WaitsAnnounced,
		Semantics:      h.Semantics,
		Open: func(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
			return c.Open(ctx, addr, cfg)
		},
	}
	for _, v := range h.Variants {
		if v != stores.Correct {
			b.Mutants = append(b.Mutants, v)
		}
	}
	return b
}

// Open starts a process of the store and opens it on addr with cfg.
func (c *Command) Open(ctx context.Context, addr string, cfg stores.Config) (stores.Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Variant == "" {
		cfg.Variant = stores.Correct
	}
	wc := &Config{LockTTLMs: durMs(cfg.LockTTL), RetentionMs: durMs(cfg.Retention), Variant: cfg.Variant, Namespace: cfg.Namespace, Addr: addr}
	s := &Store{c: c, cfg: wc}
	if _, err := s.proc(ctx); err != nil {
		return nil, err
	}
	if c.Hello.Extend {
		return extending{s}, nil
	}
	return s, nil
}

// extending is a Store whose hello declares extend: only it is a
// stores.Extender, so a harness renews claims only on a store that can.
type extending struct{ *Store }

// Extend sends an extend request.
func (s extending) Extend(ctx context.Context, key stores.KeyRef, token stores.Token, now time.Time) error {
	n := ms(now)
	_, err := s.call(ctx, toStore{Type: "extend", Key: &key, Token: tokenField(token), NowMs: &n})
	return err
}

// Store is one opened store: a process, started again on the same data
// after a crash.
type Store struct {
	c   *Command
	cfg *Config

	mu     sync.Mutex
	p      *proc
	closed bool

	// deaths counts its processes' deaths on their own, and firstDeath
	// keeps the first one's error (Deaths).
	deathMu    sync.Mutex
	deaths     int
	firstDeath string
}

var (
	_ stores.Store     = (*Store)(nil)
	_ stores.Extender  = extending{}
	_ stores.RowShower = (*Store)(nil)
	_ stores.Restarter = (*Store)(nil)
)

// died counts a death of one of the store's processes on its own.
func (s *Store) died(err error) {
	s.deathMu.Lock()
	defer s.deathMu.Unlock()
	if s.deaths++; s.deaths == 1 {
		s.firstDeath = err.Error()
	}
}

// Deaths says how many times the store's processes died on their own
// (not at a crash the harness injected), and the first one's error.
func (s *Store) Deaths() (int, string) {
	s.deathMu.Lock()
	defer s.deathMu.Unlock()
	return s.deaths, s.firstDeath
}

// proc returns the live process, starting (and opening) one if the last
// one died.
func (s *Store) proc(ctx context.Context) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("exec store: closed")
	}
	if s.p != nil && !s.p.isDead() {
		return s.p, nil
	}
	p, err := s.c.start(ctx, s.cfg.Addr, s.cfg, s.died)
	if err != nil {
		return nil, err
	}
	s.p = p
	return p, nil
}

func (s *Store) call(ctx context.Context, m toStore) (*fromStore, error) {
	p, err := s.proc(ctx)
	if err != nil {
		return nil, err
	}
	m.Trace = faults.Tracing(ctx)
	return p.call(ctx, m)
}

// Begin sends a begin request.
func (s *Store) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	wr := &wireRequest{Key: req.KeyRef, Fingerprint: req.Fingerprint, NowMs: ms(req.Now)}
	if req.Lease > 0 {
		wr.LeaseMs = durMs(req.Lease)
	}
	r, err := s.call(ctx, toStore{Type: "begin", Request: wr})
	if err != nil {
		return stores.Decision{}, err
	}
	d, err := r.Decision.decision(s.c.Hello, fromMs(wr.NowMs))
	if err != nil {
		err = fmt.Errorf("%w: begin %s: %v", ErrProtocol, req.KeyRef, err)
		s.c.setFatal(err)
		return stores.Decision{}, err
	}
	return d, nil
}

// Complete sends a complete request.
func (s *Store) Complete(ctx context.Context, key stores.KeyRef, token stores.Token, resp stores.Response) error {
	_, err := s.call(ctx, toStore{Type: "complete", Key: &key, Token: tokenField(token), Response: &resp})
	return err
}

// tokenField is a token as the wire carries it: always present.
func tokenField(t stores.Token) *string {
	s := string(t)
	return &s
}

// Release sends a release request.
func (s *Store) Release(ctx context.Context, key stores.KeyRef, token stores.Token) error {
	_, err := s.call(ctx, toStore{Type: "release", Key: &key, Token: tokenField(token)})
	return err
}

// Prune sends a prune request.
func (s *Store) Prune(ctx context.Context, now time.Time) (int, error) {
	n := ms(now)
	r, err := s.call(ctx, toStore{Type: "prune", NowMs: &n})
	if err != nil {
		return 0, err
	}
	if r.Removed == nil {
		err := fmt.Errorf("%w: ok to a prune without removed", ErrProtocol)
		s.c.setFatal(err)
		return 0, err
	}
	return *r.Removed, nil
}

// ShowRow sends a show request, for a demo; a store whose hello does not
// declare show shows no row.
func (s *Store) ShowRow(ctx context.Context, key stores.KeyRef) (string, error) {
	if !s.c.Hello.Show {
		return "(the store shows no rows)", nil
	}
	r, err := s.call(ctx, toStore{Type: "show", Key: &key})
	if err != nil {
		return "", err
	}
	if r.Row == nil {
		return "", fmt.Errorf("%w: ok to a show without a row", ErrProtocol)
	}
	return *r.Row, nil
}

// Close sends a close request, then waits for the process to exit (it is
// killed after CloseTimeout).
func (s *Store) Close() error {
	s.mu.Lock()
	p := s.p
	s.closed = true
	s.mu.Unlock()
	if p == nil || p.isDead() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
	defer cancel()
	p.closing.Store(true)
	_, err := p.call(ctx, toStore{Type: "close"})
	p.close()
	return err
}
