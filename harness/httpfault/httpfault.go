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

	mu   sync.Mutex
	proc *exec.Cmd
	done chan struct{} // closed when proc exits
	err  error         // proc's exit
}

// FreePort asks the kernel for a free port on 127.0.0.1.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// NewInstance describes an instance: command is run by /bin/sh with
// "{port}" replaced by port and PORT=<port> plus env in its environment;
// its output goes to log.
func NewInstance(name string, port int, command string, env []string, log io.Writer) *Instance {
	return &Instance{Name: name, Port: port, cmd: strings.ReplaceAll(command, "{port}", strconv.Itoa(port)),
		env: append([]string{"PORT=" + strconv.Itoa(port)}, env...), log: log}
}

// Addr is the instance's host:port.
func (in *Instance) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(in.Port)) }

// Start starts the process (in its own process group, so that a kill or
// a pause reaches the shell's children too).
func (in *Instance) Start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := exec.Command("/bin/sh", "-c", in.cmd)
	c.Env = append(os.Environ(), in.env...)
	c.Stdout, c.Stderr = in.log, in.log
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return fmt.Errorf("instance %s: %v", in.Name, err)
	}
	in.proc, in.done, in.err = c, make(chan struct{}), nil
	done := in.done
	go func() {
		err := c.Wait()
		in.mu.Lock()
		in.err = err
		in.mu.Unlock()
		close(done)
	}()
	return nil
}

// Ready waits until the instance answers HTTP (ping says whether an
// address does), its process exits, or timeout passes.
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
			return fmt.Errorf("instance %s exited before it answered HTTP on port %d (%v)", in.Name, in.Port, err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = ping(ctx, "http://"+in.Addr()+"/"); last == nil {
			return nil
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

// Kill kills the process group with SIGKILL and waits for the process.
func (in *Instance) Kill() error {
	_ = in.signal(syscall.SIGCONT) // a stopped process must run to die promptly
	err := in.signal(syscall.SIGKILL)
	in.mu.Lock()
	done := in.done
	in.mu.Unlock()
	if done != nil {
		<-done
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
func (s Schedule) Run(ctx context.Context, h *history.History, names []string, instances []*Instance, proxies []nemesis.Proxy) error {
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
		return nil
	}
	draw := func(mean time.Duration) time.Duration {
		return mean/2 + time.Duration(rng.Int63n(int64(mean)+1))
	}
	for {
		if !sleep(ctx, draw(s.Gap)) {
			return nil
		}
		i := rng.Intn(len(names))
		kind := kinds[rng.Intn(len(kinds))]
		d := draw(s.Window)
		f := history.Fault{Client: -1, Failpoint: names[i], Start: h.Now()}
		var err error
		switch kind {
		case "kill":
			f.Kind = history.FaultInstanceKill
			if err = instances[i].Kill(); err == nil {
				sleep(ctx, d)
				if err = instances[i].Start(); err == nil {
					err = s.Ready(context.WithoutCancel(ctx), instances[i])
				}
			}
		case "pause":
			f.Kind = history.FaultInstancePause
			if err = instances[i].Pause(); err == nil {
				sleep(ctx, d)
				err = instances[i].Resume()
			}
		default:
			f.Kind = history.NetFault(kind)
			if err = nemesis.NetOn(proxies[i], kind, 50*time.Millisecond, 30*time.Millisecond); err == nil {
				sleep(ctx, d)
				err = proxies[i].Heal()
			}
		}
		f.End = h.Now()
		h.AddFault(f)
		if err != nil {
			return fmt.Errorf("fault %s on %s: %w", f.Kind, names[i], err)
		}
	}
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
