package execstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
)

// ErrProtocol is wrapped by every error that says the store broke the
// protocol (a line that is not JSON, an unknown field, an answer to no
// request): one line that names the line.
var ErrProtocol = errors.New("protocol error")

// ErrDied is wrapped by the error of a call whose process died (or was
// killed at another call's crash) before it answered: an unknown outcome.
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

	fatalMu sync.Mutex
	fatal   error
	onFatal func(error)
}

// Probe starts the store once, reads its hello, and stops it.
func Probe(ctx context.Context, line string, env []string) (*Command, error) {
	c := &Command{Line: line, Env: env}
	p, err := c.start(ctx, "", nil)
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
func (c *Command) OnFatal(f func(error)) { c.onFatal = f }

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
	c.fatalMu.Unlock()
	if first && c.onFatal != nil {
		c.onFatal(err)
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
	if h.Fence {
		b.Fence = Fence
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
	_, err := s.call(ctx, toStore{Type: "extend", Key: &key, Token: storeToken(s.c.Hello, token), NowMs: &n})
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
}

var (
	_ stores.Store     = (*Store)(nil)
	_ stores.Extender  = extending{}
	_ stores.RowShower = (*Store)(nil)
)

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
	p, err := s.c.start(ctx, s.cfg.Addr, s.cfg)
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
	_, err := s.call(ctx, toStore{Type: "complete", Key: &key, Token: storeToken(s.c.Hello, token), Response: &resp})
	return err
}

// Release sends a release request.
func (s *Store) Release(ctx context.Context, key stores.KeyRef, token stores.Token) error {
	_, err := s.call(ctx, toStore{Type: "release", Key: &key, Token: storeToken(s.c.Hello, token)})
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
	_, err := p.call(ctx, toStore{Type: "close"})
	p.close()
	return err
}

// proc is one running store process.
type proc struct {
	c     *Command
	cmd   *exec.Cmd
	hello Hello
	in    io.WriteCloser
	out   *batchWriter
	tail  *tail

	nextID atomic.Int64
	mu     sync.Mutex
	calls  map[int64]*pending
	dead   error
	exited chan struct{}
}

type pending struct {
	ctx context.Context
	ch  chan *fromStore
	err error
}

// start starts a process, reads its hello and, with cfg, opens it.
func (c *Command) start(ctx context.Context, addr string, cfg *Config) (*proc, error) {
	cmd := command(c.Line)
	cmd.Env = append(os.Environ(), c.Env...)
	if cfg != nil {
		cmd.Env = append(cmd.Env, "IDEM_STORE_ADDR="+addr, "IDEM_NAMESPACE="+cfg.Namespace, "IDEM_VARIANT="+cfg.Variant)
	}
	setProcAttr(cmd)
	p := &proc{c: c, cmd: cmd, calls: map[int64]*pending{}, exited: make(chan struct{}), tail: &tail{}}
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(c.Stderr, p.tail)
	} else {
		cmd.Stderr = p.tail
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.in, p.out = in, &batchWriter{w: in}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec store %q: %v", c.Line, err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	r := bufio.NewReaderSize(out, 64<<10)
	helloCh := make(chan error, 1)
	go func() {
		line, err := readLine(r)
		if err != nil {
			helloCh <- fmt.Errorf("exec store %q: no hello: %v", c.Line, p.why(err))
			return
		}
		var h Hello
		if err := strict(line, &h); err != nil {
			helloCh <- fmt.Errorf("exec store %q: %w on line 1 %s: %v", c.Line, ErrProtocol, quoteLine(line), err)
			return
		}
		if err := h.validate(); err != nil {
			helloCh <- fmt.Errorf("exec store %q: %w on line 1 %s: %v", c.Line, ErrProtocol, quoteLine(line), err)
			return
		}
		p.hello = h
		helloCh <- nil
		p.read(r)
	}()
	select {
	case err = <-helloCh:
	case <-time.After(HelloTimeout):
		err = fmt.Errorf("exec store %q: no hello within %v", c.Line, HelloTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		p.kill(err)
		if errors.Is(err, ErrProtocol) {
			c.setFatal(err)
		}
		return nil, err
	}
	if c.Hello.Name != "" && (p.hello.Name != c.Hello.Name || p.hello.Clock != c.Hello.Clock) {
		err := fmt.Errorf("exec store %q: %w: this process said hello as %s (%s clock), the first as %s (%s clock)", c.Line, ErrProtocol, p.hello.Name, p.hello.Clock, c.Hello.Name, c.Hello.Clock)
		p.kill(err)
		c.setFatal(err)
		return nil, err
	}
	if cfg == nil {
		return p, nil
	}
	if cfg.Variant != stores.Correct && !containsString(p.hello.Variants, cfg.Variant) {
		p.close()
		return nil, fmt.Errorf("exec store %s: no variant %q (its variants: correct %s)", p.hello.Name, cfg.Variant, strings.Join(p.hello.Variants, " "))
	}
	octx, cancel := context.WithTimeout(ctx, OpenTimeout)
	defer cancel()
	if _, err := p.call(octx, toStore{Type: "open", Open: cfg}); err != nil {
		p.kill(err)
		return nil, fmt.Errorf("exec store %s: open: %w", p.hello.Name, err)
	}
	return p, nil
}

// command runs a plain command line (words without shell syntax)
// directly, and any other through sh -c: a store started directly is the
// process the kernel kills when its parent dies (see setProcAttr), where
// a shell in between would die alone and leave the store running.
func command(line string) *exec.Cmd {
	if f := strings.Fields(line); len(f) > 0 && !strings.ContainsAny(line, "\"'`$&|;<>()\\*?~{}[]#=") {
		return exec.Command(f[0], f[1:]...)
	}
	return exec.Command("sh", "-c", line)
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// readLine reads one line, without its newline; a line of any length.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		buf := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			line, err = r.ReadSlice('\n')
			buf = append(buf, line...)
		}
		line = buf
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			return nil, fmt.Errorf("the last line has no newline: %s", quoteLine(line))
		}
		return nil, err
	}
	return line[:len(line)-1], nil
}

// quoteLine shows a line in an error, cut to 200 bytes.
func quoteLine(line []byte) string {
	if len(line) > 200 {
		return fmt.Sprintf("%q…", line[:200])
	}
	return fmt.Sprintf("%q", line)
}

// read dispatches the store's lines until it exits or breaks the protocol.
func (p *proc) read(r *bufio.Reader) {
	for n := 2; ; n++ {
		line, err := readLine(r)
		if err != nil {
			p.kill(fmt.Errorf("%w (%s)", ErrDied, p.why(err)))
			return
		}
		var m fromStore
		err = strict(line, &m)
		if err == nil {
			err = m.check(p.hello)
		}
		if err != nil {
			err = fmt.Errorf("exec store %s: %w on line %d %s: %v", p.hello.Name, ErrProtocol, n, quoteLine(line), err)
			p.c.setFatal(err)
			p.kill(err)
			return
		}
		p.mu.Lock()
		c := p.calls[*m.ID]
		p.mu.Unlock()
		switch m.Type {
		case "hit":
			go p.hit(c, *m.ID, m.Point)
		case "trace":
			if c != nil {
				faults.Trace(c.ctx, m.Step, m.Result)
			}
		default:
			if c == nil {
				continue // a call the caller gave up on: its late answer
			}
			p.mu.Lock()
			delete(p.calls, *m.ID)
			p.mu.Unlock()
			c.ch <- &m
		}
	}
}

// hit passes the call's failpoint to the caller's handler (the
// scheduler): go on, or, at a crash, kill the process there.
func (p *proc) hit(c *pending, id int64, point string) {
	var err error
	if c != nil {
		err = faults.Hit(c.ctx, point)
	}
	if errors.Is(err, faults.ErrCrashed) {
		c.err = err
		p.kill(fmt.Errorf("%w: killed at failpoint %s of another call (a crash)", ErrDied, point))
		return
	}
	// Go on, also for a call its caller gave up on (its answer will be
	// dropped): the store must not wait forever.
	_ = p.send(toStore{Type: "go", ID: id})
}

func (p *proc) send(m toStore) error {
	if m.Type == "begin" && m.Request != nil && utf8.ValidString(m.Request.Fingerprint) {
		return p.out.write(append(appendBegin(make([]byte, 0, 256), m.ID, m.Trace, m.Request), '\n'))
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return p.out.write(append(b, '\n'))
}

// call sends a request and waits for its answer.
func (p *proc) call(ctx context.Context, m toStore) (*fromStore, error) {
	m.ID = p.nextID.Add(1)
	c := &pending{ctx: ctx, ch: make(chan *fromStore, 1)}
	p.mu.Lock()
	if p.dead != nil {
		err := p.dead
		p.mu.Unlock()
		return nil, err
	}
	p.calls[m.ID] = c
	p.mu.Unlock()
	if err := p.send(m); err != nil {
		p.kill(fmt.Errorf("%w (writing to it: %v)", ErrDied, p.why(err)))
	}
	select {
	case r := <-c.ch:
		if r == nil {
			if c.err != nil {
				return nil, c.err
			}
			return nil, p.deadErr()
		}
		if r.Type == "error" {
			switch r.Code {
			case CodeFenced:
				return nil, fmt.Errorf("%w (%s)", stores.ErrFenced, r.Message)
			case CodeInvalidKey:
				return nil, fmt.Errorf("%w (%s)", stores.ErrInvalidKey, r.Message)
			}
			return nil, fmt.Errorf("exec store %s: %s", p.hello.Name, r.Message)
		}
		return r, nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.calls, m.ID)
		p.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (p *proc) isDead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead != nil
}

func (p *proc) deadErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

// kill kills the process (its whole group) and fails its calls with err.
func (p *proc) kill(err error) {
	p.mu.Lock()
	if p.dead != nil {
		p.mu.Unlock()
		return
	}
	p.dead = err
	calls := p.calls
	p.calls = map[int64]*pending{}
	p.mu.Unlock()
	killGroup(p.cmd)
	_ = p.in.Close()
	for _, c := range calls {
		c.ch <- nil
	}
}

// close closes the process's stdin and waits for it to exit, killing it
// after CloseTimeout.
func (p *proc) close() {
	p.mu.Lock()
	if p.dead == nil {
		p.dead = errors.New("exec store: closed")
	}
	p.mu.Unlock()
	_ = p.in.Close()
	select {
	case <-p.exited:
	case <-time.After(CloseTimeout):
		killGroup(p.cmd)
		<-p.exited
	}
}

// why says why reading or writing failed: the process's exit and the
// last line of its stderr, when it has exited.
func (p *proc) why(err error) string {
	select {
	case <-p.exited:
	case <-time.After(time.Second):
		return err.Error()
	}
	msg := fmt.Sprintf("it exited (%v)", p.cmd.ProcessState)
	if last := p.tail.last(); last != "" {
		msg += "; its stderr: " + last
	}
	return msg
}

// tail keeps the end of a process's stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(b), nil
}

// last is the last non-empty line written.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
