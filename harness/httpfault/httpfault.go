// Package httpfault injects the faults of a black-box run (idemcheck
// http): it starts the service's instances as processes when idemcheck
// runs them itself (each on its own port), kills, pauses and restarts
// them, and switches the network faults of each instance's proxy on and
// off, on a schedule drawn from the seed. Every fault goes into the
// history with its window and the instance it hit.
package httpfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemcheck/idemcheck/harness/history"
	"github.com/idemcheck/idemcheck/harness/nemesis"
)

// Instance is one process of the service under test, started from a
// shell command with its own port.
type Instance struct {
	Name string
	Port int
	cmd  string
	env  []string
	log  io.Writer
	tail *tail

	// life is held through every change of the process's life (a kill
	// and its restart, a pause and its resume, a restart after a crash),
	// so that two of them never interleave.
	life sync.Mutex

	mu      sync.Mutex
	proc    *exec.Cmd
	marker  string        // the markerEnv value its processes carry
	done    chan struct{} // closed when proc exits
	err     error         // proc's exit
	killing bool          // the exit to come is idemcheck's doing
	onExit  func(in *Instance, err error)
}

// tail keeps the last bytes written to an instance's log.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 2048

// Write keeps the last tailSize bytes of p and what came before.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailSize:]...)
	}
	t.mu.Unlock()
	return len(p), nil
}

// LogTail returns the last lines the instance's current (or last)
// process wrote, up to 2 KiB.
func (in *Instance) LogTail() string {
	in.tail.mu.Lock()
	defer in.tail.mu.Unlock()
	s := string(in.tail.buf)
	if len(in.tail.buf) == tailSize {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.TrimRight(s, "\n")
}

// NewInstance describes an instance: command is run by /bin/sh with
// "{port}" replaced by port and PORT=<port> plus env in its environment;
// its output goes to log.
func NewInstance(name string, port int, command string, env []string, log io.Writer) *Instance {
	t := &tail{}
	if log == nil {
		log = io.Discard
	}
	return &Instance{Name: name, Port: port, cmd: strings.ReplaceAll(command, "{port}", strconv.Itoa(port)),
		env: append([]string{"PORT=" + strconv.Itoa(port)}, env...), log: io.MultiWriter(log, t), tail: t}
}

// execForm is a simple command (words, leading VAR=value assignments,
// no shell operators) as the shell execs it ("VAR=x exec prog args"),
// so that the service is the process that dies with a run killed with
// SIGKILL (Pdeathsig survives exec): Debian's sh ran prog as its child,
// which outlived the kill until the next run reaped it. Any other
// command is left as it is.
func execForm(cmd string) string {
	if strings.ContainsAny(cmd, ";&|<>()`$\\\n{}*?[]#~") {
		return cmd
	}
	rest := cmd
	for {
		trimmed := strings.TrimLeft(rest, " \t")
		word, _, _ := strings.Cut(trimmed, " ")
		word, _, _ = strings.Cut(word, "\t")
		name, _, isAssign := strings.Cut(word, "=")
		switch {
		case word == "" || shellWords[word]:
			return cmd // a builtin or a keyword is no program to exec
		case isAssign && validName(name):
			if strings.ContainsAny(word, "'\"") {
				return cmd // a quoted value may hold spaces: not split here
			}
			rest = trimmed[len(word):]
			continue
		}
		at := len(cmd) - len(trimmed)
		return cmd[:at] + "exec " + cmd[at:]
	}
}

// shellWords are the shell's builtins and keywords: a command that
// starts with one is left to the shell (exec exit 3 is no command).
var shellWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(". : [ ! alias bg break case cd command continue do done echo elif else esac eval exec exit export " +
		"false fc fg fi for getopts hash if in jobs kill local printf pwd read readonly return set shift test then times trap true type " +
		"ulimit umask unalias unset until wait while") {
		shellWords[w] = true
	}
}

// validName reports whether s is a shell variable's name.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && !(i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Addr is the instance's host:port.
func (in *Instance) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(in.Port)) }

// Start starts the process (in its own process group, so that a kill or
// a pause reaches the shell's children too), killed if this process dies.
func (in *Instance) Start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := exec.Command("/bin/sh", "-c", execForm(in.cmd))
	marker := newMarker()
	c.Env = append(append(os.Environ(), in.env...), markerEnv+"="+marker)
	c.Stdout, c.Stderr = in.log, in.log
	// Pdeathsig: an instance dies with a run killed with SIGKILL (the
	// shell, or the program it execs); a shell's children are left to
	// the next run's Reap.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Its output is copied through a pipe, which a process it started
	// outside its group (Node's spawn with detached: true and stdio
	// inherited, setsid) holds open after the instance died: Wait waited
	// for that process too, and a kill never ended, nor the run (it hung
	// until a second signal). Once the instance is gone, its output gets
	// pipeWait more, and the pipe is closed.
	c.WaitDelay = pipeWait
	// The tail is this process's: emptied before it starts, since a
	// process that fails at once may have written its last words before
	// Start returns (emptied after, a crash's tail lost them under -race).
	in.tail.mu.Lock()
	in.tail.buf = in.tail.buf[:0]
	in.tail.mu.Unlock()
	if err := c.Start(); err != nil {
		return fmt.Errorf("instance %s: %v", in.Name, err)
	}
	register(c.Process.Pid, marker) // the group's id is its leader's (Setpgid)
	in.proc, in.marker, in.done, in.err, in.killing = c, marker, make(chan struct{}), nil, false
	done := in.done
	go func() {
		err := c.Wait()
		unregister(c.Process.Pid)
		in.mu.Lock()
		in.err = err
		expected, onExit := in.killing, in.onExit
		in.mu.Unlock()
		close(done)
		if !expected && onExit != nil {
			onExit(in, err)
		}
	}()
	return nil
}

// pipeWait is how long an instance's output is still copied once its
// process exited: what it wrote last, not what a process it left behind
// writes.
const pipeWait = 2 * time.Second

// running reports whether the instance's process is alive.
func (in *Instance) running() bool {
	in.mu.Lock()
	done := in.done
	in.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Permanent marks a ping's error as one waiting cannot mend (an https
// instance whose certificate is not trusted): [Instance.Ready] returns
// it at once.
func Permanent(err error) error { return permanent{err} }

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Ready waits until the instance answers HTTP (ping says whether an
// address does), its process exits, ping fails for good ([Permanent]),
// or timeout passes.
func (in *Instance) Ready(ctx context.Context, timeout time.Duration, ping func(context.Context, string) error) error {
	in.mu.Lock()
	done := in.done
	in.mu.Unlock()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			in.mu.Lock()
			err := in.err
			in.mu.Unlock()
			how := "exit status 0: the command ended; it must run the service until killed"
			if err != nil {
				how = err.Error()
			}
			return fmt.Errorf("instance %s exited before it answered HTTP on port %d (%s)", in.Name, in.Port, how)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = ping(ctx, "http://"+in.Addr()+"/"); last == nil {
			return nil
		} else if errors.As(last, new(permanent)) {
			return fmt.Errorf("instance %s on port %d: %w", in.Name, in.Port, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("instance %s did not answer HTTP on port %d within %v: %v", in.Name, in.Port, timeout, last)
}

// signal sends sig to the instance's process group.
func (in *Instance) signal(sig syscall.Signal) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.proc == nil || in.proc.Process == nil {
		return fmt.Errorf("instance %s is not running", in.Name)
	}
	return syscall.Kill(-in.proc.Process.Pid, sig)
}

// Kill kills the process group with SIGKILL and waits for the process,
// then kills the processes that carry its marker outside the group (a
// helper it started with setsid, or Node's detached: true): an instance
// killed dies whole, as a crashed machine's would, and a run that ended
// cleanly left such helpers running for ever.
func (in *Instance) Kill() error {
	in.mu.Lock()
	in.killing = true
	marker := in.marker
	in.mu.Unlock()
	_ = in.signal(syscall.SIGCONT) // a stopped process must run to die promptly
	err := in.signal(syscall.SIGKILL)
	in.mu.Lock()
	done := in.done
	in.mu.Unlock()
	if done != nil {
		<-done
	}
	if marker != "" {
		killMarked(marker)
	}
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Pause stops the process group (SIGSTOP); Resume continues it.
func (in *Instance) Pause() error { return in.signal(syscall.SIGSTOP) }

// Resume continues a paused instance.
func (in *Instance) Resume() error { return in.signal(syscall.SIGCONT) }

// Schedule is the seed-drawn fault plan of a run.
type Schedule struct {
	Seed int64
	// Process enables kills and pauses (instances started by idemcheck).
	Process bool
	// Network enables latency, resets and lost replies on the proxies.
	Network bool
	// Gap is the mean pause between two faults; Window the mean length of
	// one fault.
	Gap, Window time.Duration
	// Ready re-checks a restarted instance.
	Ready func(ctx context.Context, in *Instance) error
}

// Run injects faults until ctx ends, then heals everything: every proxy
// healed, every paused instance resumed, every killed one started again
// and ready. Instances and proxies are parallel (proxies[i] fronts
// instances[i]); instances may be nil (targets started by someone else).
// A fault that cannot be injected or healed (a pause of an instance that
// has just crashed, a restart that never answers) does not end the run:
// it is returned, one line each, for the report; down names, one line
// each, the instances killed that did not come back (a restart that never
// answered), which the rest of the run, and its final probes, went
// without (it said "fault not injected" of them, and a run passed saying
// nothing of the instance it lost).
func (s Schedule) Run(ctx context.Context, h *history.History, names []string, instances []*Instance, proxies []nemesis.Proxy) (problems, down []string) {
	rng := rand.New(rand.NewSource(s.Seed*7919 + 17))
	var kinds []string
	if s.Network {
		kinds = append(kinds, nemesis.NetKinds...)
	}
	if s.Process && instances != nil {
		kinds = append(kinds, "kill", "pause")
	}
	if len(kinds) == 0 {
		<-ctx.Done()
		return nil, nil
	}
	draw := func(mean time.Duration) time.Duration {
		return mean/2 + time.Duration(rng.Int63n(int64(mean)+1))
	}
	lost := map[string]string{} // the instances down, by name: a later kill and restart that answers brings one back
	for {
		if !sleep(ctx, draw(s.Gap)) {
			for _, n := range names {
				if why, ok := lost[n]; ok {
					down = append(down, why)
				}
			}
			return problems, down
		}
		i := rng.Intn(len(names))
		kind := kinds[rng.Intn(len(kinds))]
		d := draw(s.Window)
		f := history.Fault{Client: -1, Failpoint: names[i]}
		var err error
		switch kind {
		case "kill", "pause":
			in := instances[i]
			in.life.Lock()
			if !in.running() {
				in.life.Unlock()
				continue // down after a crash: its supervisor restarts it
			}
			f.Start = h.Now()
			if kind == "kill" {
				f.Kind = history.FaultInstanceKill
				h.Faulting(f)
				if err = in.Kill(); err == nil {
					sleep(ctx, d)
					if err = in.Start(); err == nil {
						err = s.Ready(context.WithoutCancel(ctx), in)
					}
					delete(lost, names[i])
					if err != nil {
						lost[names[i]] = fmt.Sprintf("instance %s, killed at %s, did not come back: %v", names[i], ms(f.Start), err)
						err = nil
					}
				}
			} else {
				f.Kind = history.FaultInstancePause
				h.Faulting(f)
				if err = in.Pause(); err == nil {
					sleep(ctx, d)
					err = in.Resume()
				}
			}
			in.life.Unlock()
		default:
			f.Start = h.Now()
			f.Kind = history.NetFault(kind)
			h.Faulting(f)
			if err = nemesis.NetOn(proxies[i], kind, 50*time.Millisecond, 30*time.Millisecond); err == nil {
				sleep(ctx, d)
				err = proxies[i].Heal()
			}
		}
		f.End = h.Now()
		h.AddFault(f)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: fault %s on %s: %v", ms(f.Start), f.Kind, names[i], err))
		}
	}
}

func ms(t int64) string { return history.Millis(t) }

// Supervisor restarts the instances that exit by themselves and records
// each exit: in the history as a [history.FaultInstanceExit] window (from
// the exit to the restart), and as a [history.Crash] with the exit status
// and the tail of the instance's log. A crash is the service's event, not
// the run's end.
type Supervisor struct {
	ctx   context.Context
	h     *history.History
	ready func(context.Context, *Instance) error

	wg      sync.WaitGroup
	mu      sync.Mutex
	crashes []history.Crash
	count   map[string]int
	stopped bool
}

// MaxRestarts bounds the restarts of one instance after crashes: a
// service that crashes as soon as it starts is not restarted forever.
const MaxRestarts = 50

// NewSupervisor makes a supervisor; ready re-checks a restarted instance.
func NewSupervisor(ctx context.Context, h *history.History, ready func(context.Context, *Instance) error) *Supervisor {
	return &Supervisor{ctx: ctx, h: h, ready: ready, count: map[string]int{}}
}

// Watch supervises in: call it before in starts.
func (s *Supervisor) Watch(in *Instance) {
	in.mu.Lock()
	in.onExit = s.exited
	in.mu.Unlock()
}

func (s *Supervisor) exited(in *Instance, err error) {
	at := s.h.Now()
	status := "exited"
	if err != nil {
		status = err.Error()
	}
	s.mu.Lock()
	s.count[in.Name]++
	n, stopped := s.count[in.Name], s.stopped
	s.mu.Unlock()
	c := history.Crash{Instance: in.Name, At: at, Status: status, LogTail: in.LogTail()}
	exit := history.Fault{Client: -1, Kind: history.FaultInstanceExit, Failpoint: in.Name, Start: at}
	s.h.Faulting(exit)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		in.life.Lock()
		defer in.life.Unlock()
		switch {
		case s.ctx.Err() != nil || stopped:
			c.Err = "the run was over: not restarted"
		case n > MaxRestarts:
			c.Err = fmt.Sprintf("crashed %d times: not restarted again", n)
		case in.running():
			c.Restarted = s.h.Now() // a kill's restart came first
		default:
			if err := in.Start(); err != nil {
				c.Err = err.Error()
			} else if err := s.ready(context.WithoutCancel(s.ctx), in); err != nil {
				c.Err = err.Error()
			} else {
				c.Restarted = s.h.Now()
			}
		}
		end := c.Restarted
		if end == 0 {
			end = s.h.Now()
		}
		exit.End = end
		s.h.AddFault(exit)
		s.h.NoteCrash(c)
		s.mu.Lock()
		s.crashes = append(s.crashes, c)
		s.mu.Unlock()
	}()
}

// Wait waits for the restarts in progress.
func (s *Supervisor) Wait() { s.wg.Wait() }

// Stop restarts nothing more and waits for the restarts in progress: call
// it before the instances are killed at the end of a run, so that no
// instance is started again behind the last kill.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.wg.Wait()
}

// Crashes returns the exits recorded so far, by time.
func (s *Supervisor) Crashes() []history.Crash {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]history.Crash(nil), s.crashes...)
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// WatchStalls records, until ctx ends, every window longer than threshold
// in which this process did not run (a loaded machine, a long GC): the
// provider and the proxies live here, so a stall holds every charge and
// every request, and the report shows it beside what it may explain.
func WatchStalls(ctx context.Context, h *history.History, threshold time.Duration) {
	const tick = 20 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	last := h.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := h.Now()
		if time.Duration(now-last) > threshold+tick {
			h.AddFault(history.Fault{Client: -1, Kind: history.FaultStall, Failpoint: "idemcheck", Start: last, End: now})
		}
		last = now
	}
}
