package execstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/internal/clip"
	"github.com/idemcheck/idemcheck/stores"
)

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
	// died, if set, hears the process's death on its own (an error
	// wrapping stores.ErrProcessDied), once: the Store counts them.
	died func(error)
	// closing: the store was asked to close, and may exit on its own.
	closing atomic.Bool
	// unanswered bounds how long it may hold a request without an answer
	// (UnansweredAfter).
	unanswered time.Duration
}

type pending struct {
	ctx context.Context
	ch  chan *fromStore
	err error
	// held counts the call's failpoint hits waiting on the caller's
	// handler: the store is not holding the call then; resumed is when
	// the last of them was let go (Unix nanoseconds), from which the
	// store holds it again.
	held    atomic.Int32
	resumed atomic.Int64
}

// start starts a process, reads its hello and, with cfg, opens it;
// died, if set, hears its death on its own (proc.died).
func (c *Command) start(ctx context.Context, addr string, cfg *Config, died func(error)) (*proc, error) {
	cmd := command(c.Line)
	cmd.Env = append(os.Environ(), c.Env...)
	if cfg != nil {
		cmd.Env = append(cmd.Env, "IDEM_STORE_ADDR="+addr, "IDEM_NAMESPACE="+cfg.Namespace, "IDEM_VARIANT="+cfg.Variant)
	}
	setProcAttr(cmd)
	p := &proc{c: c, cmd: cmd, calls: map[int64]*pending{}, exited: make(chan struct{}), tail: &tail{}, died: died, unanswered: c.Unanswered}
	if p.unanswered <= 0 {
		p.unanswered = UnansweredAfter
		if cfg != nil {
			p.unanswered += 4 * time.Duration(cfg.LockTTLMs*float64(time.Millisecond))
		}
	}
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
			helloCh <- fmt.Errorf("exec store %q: %w on line 1 %s: %v%s", c.Line, ErrProtocol, quoteLine(line), err, logHint(line))
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
		err = fmt.Errorf("exec store %q: no hello within %v: a store that started writes its hello at once and flushes every line it writes (a pipe is block-buffered in Python and C unless flushed: print(..., flush=True), fflush(stdout))", c.Line, HelloTimeout)
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
		err := fmt.Errorf("exec store %q: %w: this process said hello as %s (%s clock), the first as %s (%s clock); the first is started only to read the hello, with no IDEM_VARIANT, IDEM_NAMESPACE or IDEM_STORE_ADDR set, so a hello must not depend on them (docs/protocol.md)", c.Line, ErrProtocol, p.hello.Name, p.hello.Clock, c.Hello.Name, c.Hello.Clock)
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
			p.kill(p.ended(p.why(err)))
			return
		}
		var m fromStore
		err = strict(line, &m)
		if err == nil {
			err = m.check(p.hello)
		}
		if err != nil {
			err = fmt.Errorf("exec store %s: %w on line %d %s: %v%s", p.hello.Name, ErrProtocol, n, quoteLine(line), err, logHint(line))
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
		c.held.Add(1)
		err = faults.Hit(c.ctx, point)
		defer func() { // after the go is sent: the store holds the call again from then
			c.resumed.Store(time.Now().UnixNano())
			c.held.Add(-1)
		}()
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
		p.kill(p.ended("writing to it: " + p.why(err)))
	}
	unanswered := time.NewTimer(p.unanswered)
	defer unanswered.Stop()
	for {
		select {
		case r := <-c.ch:
			return p.answer(c, r)
		case <-ctx.Done():
			p.mu.Lock()
			delete(p.calls, m.ID)
			p.mu.Unlock()
			return nil, ctx.Err()
		case <-unanswered.C:
			if c.held.Load() > 0 {
				unanswered.Reset(p.unanswered) // waiting on the scheduler, not on the store
				continue
			}
			if since := time.Since(time.Unix(0, c.resumed.Load())); since < p.unanswered {
				unanswered.Reset(p.unanswered - since) // the store has held it only since its go
				continue
			}
			p.mu.Lock()
			delete(p.calls, m.ID)
			p.mu.Unlock()
			said := "nothing on its stderr"
			if c := p.tail.cause(); c != "" {
				said = "its stderr: " + c
			}
			return nil, fmt.Errorf("exec store %s: %w: request %d (%s) unanswered after %v while its process lives (a thread that died on it? %s)",
				p.hello.Name, stores.ErrUnanswered, m.ID, m.Type, p.unanswered, said)
		}
	}
}

// answer is what call returns for the store's answer r to c (nil: the
// process died first).
func (p *proc) answer(c *pending, r *fromStore) (*fromStore, error) {
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
		case CodeNotApplied:
			// A Go store served by Serve sends its whole error, which
			// says "not applied: …" already: said once, its own cause
			// was clipped away after the repeat.
			msg := strings.TrimPrefix(r.Message, stores.ErrNotApplied.Error()+": ")
			return nil, fmt.Errorf("exec store %s: %w (%s)", p.hello.Name, stores.ErrNotApplied, msg)
		case CodeLost:
			return nil, fmt.Errorf("exec store %s: %w (%s)", p.hello.Name, stores.ErrLost, r.Message)
		}
		return nil, fmt.Errorf("exec store %s: %s", p.hello.Name, r.Message)
	}
	return r, nil
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
	died := p.died
	p.mu.Unlock()
	if died != nil && errors.Is(err, stores.ErrProcessDied) {
		died(err)
	}
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

// ended is the error of the calls cut by the process's end, which why
// explains: a death on its own (diedOnItsOwn), unless the store was
// asked to close, when exiting is what it should do.
func (p *proc) ended(why string) error {
	if p.closing.Load() {
		return fmt.Errorf("%w (%s)", ErrDied, why)
	}
	return diedOnItsOwn(why)
}

// diedOnItsOwn is the error of the calls a process's own death cut (it
// exited, or something other than the harness killed it): it wraps
// ErrDied and stores.ErrProcessDied, whose text leads it, so that a run
// can count such calls among its history's errors. A crash the harness
// injects kills the process first (hit), and its calls get that error.
func diedOnItsOwn(why string) error { return processDied{why} }

type processDied struct{ why string }

func (d processDied) Error() string   { return stores.ErrProcessDied.Error() + " (" + d.why + ")" }
func (d processDied) Unwrap() []error { return []error{ErrDied, stores.ErrProcessDied} }

// why says why reading or writing failed: the process's exit and what
// its stderr last said of it (tail.cause), when it has exited.
func (p *proc) why(err error) string {
	select {
	case <-p.exited:
	case <-time.After(time.Second):
		return err.Error()
	}
	msg := fmt.Sprintf("it exited (%v)", p.cmd.ProcessState)
	if cause := p.tail.cause(); cause != "" {
		msg += "; its stderr: " + cause
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

// errorLine matches a line of stderr that names an error: runtimes
// print the cause of a death on such a line (Node's "Error: Cannot find
// module", Python's "ModuleNotFoundError: …", Go's "panic: …"), then a
// stack, and some a last line of their own ("Node.js v20.20.2").
var errorLine = regexp.MustCompile(`(?i)(error|exception|panic|fatal)`)

// stackFrame matches a line of a stack trace (Node's and Java's "at …",
// Python's `File "…", line N`, Go's "goroutine N" and "file.go:N"): a
// frame may name an error in passing (Node's "at emitErrorCloseNT"),
// and is no cause.
var stackFrame = regexp.MustCompile(`^(at |File "|goroutine \d|\S+\.go:\d)`)

// maxCauseLine bounds each stderr line a death's error quotes.
const maxCauseLine = 300

// cause is what the stderr written says of a death: its last line naming
// an error, followed by its last line when that is another; else its last
// non-empty line. Each is clipped to maxCauseLine bytes: a line is for a
// person to read.
func (t *tail) cause() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !errorLine.MatchString(l) || stackFrame.MatchString(l) {
			continue
		}
		if i == len(lines)-1 {
			return clip.Bytes(l, maxCauseLine)
		}
		return clip.Bytes(l, maxCauseLine) + " … " + clip.Bytes(last, maxCauseLine)
	}
	return clip.Bytes(last, maxCauseLine)
}

// logHint says, of a line that is no JSON object at all, that the store's
// stdout carries protocol lines only: a log line printed there (Node's
// console.log) was told as a JSON error and nothing more.
//
// A JSON object without a "type" is told so too: a logger that prints
// JSON lines ({"level":"info",...}) was told only of an unknown field.
func logHint(line []byte) string {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '{' && (json.Unmarshal(t, &m) != nil || m["type"] != nil) {
		return ""
	}
	return " (the store's stdout carries protocol lines only: write logs to stderr, as console.error does in Node and print(..., file=sys.stderr) in Python)"
}
