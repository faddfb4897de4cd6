package execstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/harness/check"
	"github.com/idemcheck/idemcheck/harness/idemtest"
	"github.com/idemcheck/idemcheck/stores"
	"github.com/idemcheck/idemcheck/stores/execstore"
	"github.com/idemcheck/idemcheck/stores/lease"
	"github.com/idemcheck/idemcheck/stores/memory"
)

// serveEnv makes the test binary a store process: the memory store behind
// execstore.Serve ("memory"), or a store that breaks the protocol.
const serveEnv = "IDEM_EXECSTORE_TEST_SERVE"

func TestMain(m *testing.M) {
	switch os.Getenv(serveEnv) {
	case "":
		os.Exit(m.Run())
	case "parent": // a worker's stand-in: opens a store, then waits to be killed
		c, err := execstore.Probe(context.Background(), line("memory"), nil)
		if err == nil {
			_, err = c.Open(context.Background(), "", stores.Config{LockTTL: time.Second, Retention: time.Hour})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("opened")
		time.Sleep(time.Minute)
	case "memory":
		if f := os.Getenv(pidEnv); f != "" {
			os.WriteFile(f+".tmp", []byte(fmt.Sprint(os.Getpid())), 0o644)
			os.Rename(f+".tmp", f)
		}
		if f := os.Getenv("IDEM_EXECSTORE_TEST_CPUPROFILE"); f != "" { // the store's side of a benchmark
			if out, err := os.Create(fmt.Sprintf("%s.%d", f, os.Getpid())); err == nil {
				_ = pprof.StartCPUProfile(out)
				defer pprof.StopCPUProfile()
			}
		}
		err := execstore.Serve(context.Background(), os.Stdin, os.Stdout, memoryHello, nil, func(_ context.Context, cfg stores.Config, _ string) (stores.Store, error) {
			s, err := memory.New(cfg)
			if err != nil {
				return nil, err
			}
			return s, nil
		})
		pprof.StopCPUProfile()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "lease":
		err := execstore.Serve(context.Background(), os.Stdin, os.Stdout, leaseHello, lease.Fence, func(_ context.Context, cfg stores.Config, _ string) (stores.Store, error) {
			s, err := lease.New(cfg, nil)
			if err != nil {
				return nil, err
			}
			return s, nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "dying": // a memory store whose process exits at its third Begin (see TestDiesOnItsOwn)
		err := execstore.Serve(context.Background(), os.Stdin, os.Stdout, memoryHello, nil, func(_ context.Context, cfg stores.Config, _ string) (stores.Store, error) {
			s, err := memory.New(cfg)
			if err != nil {
				return nil, err
			}
			return &dyingAt{Store: s, at: 3}, nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "lease-fields":
		serveLeaseFields()
	case "fence-zero":
		fenceZero()
	case "token-required":
		tokenRequired()
	case "mute-save":
		muteSave()
	case "refusing": // a memory store whose saves its database refused (see TestNotAppliedCode)
		err := execstore.Serve(context.Background(), os.Stdin, os.Stdout, memoryHello, nil, func(_ context.Context, cfg stores.Config, _ string) (stores.Store, error) {
			s, err := memory.New(cfg)
			if err != nil {
				return nil, err
			}
			return refusingSaves{s}, nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "bad-hello":
		fmt.Println(`{"type":"hello","protocol":1,"name":"bad","clock":"caller","colour":"blue"}`)
	case "bad-reply":
		fmt.Println(`{"type":"hello","protocol":1,"name":"bad","clock":"caller"}`)
		var b [4096]byte
		os.Stdin.Read(b[:]) // the open request
		fmt.Println(`{"type":"ok","id":1,"bogus":true}`)
	case "log-on-stdout": // a log line printed where the replies go (Node's console.log)
		fmt.Println(`{"type":"hello","protocol":1,"name":"chatty","clock":"caller"}`)
		var b [4096]byte
		os.Stdin.Read(b[:]) // the open request
		fmt.Println(`begin {"key":"k"}`)
	case "json-log-on-stdout": // a logger's JSON line where the replies go
		fmt.Println(`{"type":"hello","protocol":1,"name":"chatty","clock":"caller"}`)
		var b [4096]byte
		os.Stdin.Read(b[:]) // the open request
		fmt.Println(`{"level":"info","msg":"ready"}`)
	}
	os.Exit(0)
}

// pidEnv names a file where a memory store process writes its pid.
const pidEnv = "IDEM_EXECSTORE_TEST_PIDFILE"

// TestStoreDiesWithItsParent: a store process dies with the process that
// started it (a worker the harness kills), there and then, as the API
// process's own store client would: killing a worker mid-claim kills its
// store mid-claim.
func TestStoreDiesWithItsParent(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), serveEnv+"=parent", pidEnv+"="+pidfile)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Process.Kill()
	// The parent probed (a store process that exited), then opened the
	// store (another, the last to write its pid).
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "opened\n" {
		t.Fatalf("the parent said %q, %v", line, err)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the store process %d is not running: %v", pid, err)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	for end := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the store process %d outlived its killed parent by 5 s", pid)
		}
	}
}

// memoryHello is what the memory store declares: its mutants are the
// variants, begin.after-select (where the split mutants read, then write)
// its one failpoint, and its mutex is released before it.
var memoryHello = execstore.Hello{Name: "go-memory", Clock: "caller", Lives: "process", Show: true,
	Points: []string{faults.BeginAfterSelect}, WaitsAnnounced: true, Variants: memory.Mutants}

// leaseHello is what the lease store declares: the server's clock (its
// own), every semantics it takes, fencing numbers and Extend.
var leaseHello = execstore.Hello{Name: "go-lease", Clock: "server", Lives: "process", Semantics: lease.Semantics,
	Fence: true, Extend: true, WaitsAnnounced: true, Variants: lease.Mutants}

// TestConformanceLease: the lease store through the protocol passes the
// whole suite with its declarations (semantics, fencing numbers, Extend,
// a server clock with decided_at_ms), and its mutant that does not
// increment the fencing number is caught: the numbers cross the protocol
// (as stores.Decision.Fence: the factory has no Fence func).
func TestConformanceLease(t *testing.T) {
	t.Parallel() // store processes of its own, named go-lease; its time is waits
	f, err := idemtest.Exec(context.Background(), line("lease"), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Semantics != lease.Semantics || f.Clock != stores.ServerClock {
		t.Fatalf("the hello's declarations did not reach the factory: %+v", f)
	}
	if f.Fence != nil {
		t.Fatal("an exec store's fences come as decision fields, not a Fence func")
	}
	idemtest.Run(t, f)
	t.Run("fence-not-incremented", func(t *testing.T) {
		msg := idemtest.ExpectFailure(t, f, "fence-not-incremented")
		if !strings.Contains(msg, "fenc") {
			t.Fatalf("the failure does not name the fence:\n%s", msg)
		}
	})
}

// line is the command that starts this test binary as a store.
func line(mode string) string {
	return fmt.Sprintf("%s=%s exec %q -test.run='^$'", serveEnv, mode, os.Args[0])
}

func memoryFactory(t testing.TB) idemtest.Factory {
	t.Helper()
	f, err := idemtest.Exec(context.Background(), line("memory"), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestConformance: the memory store, a real child process behind the
// protocol, passes the whole suite: the model test and every scenario
// that applies. The protocol neither loses nor changes what a store says.
func TestConformance(t *testing.T) {
	t.Parallel() // store processes of its own, named go-memory; its time is waits
	f := memoryFactory(t)
	if f.Name != "go-memory" || f.Clock != stores.CallerClock || !f.WaitsAnnounced {
		t.Fatalf("the hello's declarations did not reach the factory: %+v", f)
	}
	idemtest.Run(t, f)
}

// TestSchedRaceThroughFailpoint: select-then-insert, announced at
// begin.after-select, is killed by sched-race through the protocol: the
// scheduler parks the store's request at its hit and lets another in.
func TestSchedRaceThroughFailpoint(t *testing.T) {
	f := memoryFactory(t)
	open := f.Open
	f.Open = func(cfg stores.Config) (stores.Store, error) {
		cfg.Variant = "select-then-insert"
		return open(cfg)
	}
	sum, dir, err := idemtest.CheckScenario(context.Background(), f, "sched-race")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s := sum.Scenarios[0]
	if s.Verdict != check.Fail {
		t.Fatalf("sched-race on select-then-insert through the protocol: %s, want fail", s.Verdict)
	}
	for _, v := range s.Violations {
		t.Logf("%s on %s", v.Checker, v.Key)
	}
}

// TestProtocolErrors: an unknown field, in the hello or in a reply, is an
// error that names the line, and the command remembers it (a CLI exits 2).
func TestProtocolErrors(t *testing.T) {
	_, err := execstore.Probe(context.Background(), line("bad-hello"), nil)
	if !errors.Is(err, execstore.ErrProtocol) || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), `unknown field "colour"`) {
		t.Fatalf("bad hello: %v", err)
	}
	c, err := execstore.Probe(context.Background(), line("bad-reply"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Open(context.Background(), "", stores.Config{LockTTL: time.Second, Retention: time.Hour})
	if !errors.Is(c.Fatal(), execstore.ErrProtocol) || !strings.Contains(c.Fatal().Error(), "line 2") || !strings.Contains(c.Fatal().Error(), `unknown field "bogus"`) {
		t.Fatalf("bad reply: open said %v, the command's fatal error is %v", err, c.Fatal())
	}
	if strings.Contains(c.Fatal().Error(), "\n") {
		t.Fatalf("a protocol error must be one line: %q", c.Fatal())
	}
	if strings.Contains(c.Fatal().Error(), "stderr") {
		t.Fatalf("a JSON reply with a wrong field is no log line: %v", c.Fatal())
	}
	// A line that is no JSON at all says where logs go.
	c, err = execstore.Probe(context.Background(), line("log-on-stdout"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Open(context.Background(), "", stores.Config{LockTTL: time.Second, Retention: time.Hour})
	if !errors.Is(c.Fatal(), execstore.ErrProtocol) || !strings.Contains(c.Fatal().Error(), "write logs to stderr") {
		t.Fatalf("a log line on stdout: the command's fatal error is %v", c.Fatal())
	}
	c, err = execstore.Probe(context.Background(), line("json-log-on-stdout"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Open(context.Background(), "", stores.Config{LockTTL: time.Second, Retention: time.Hour})
	if !errors.Is(c.Fatal(), execstore.ErrProtocol) || !strings.Contains(c.Fatal().Error(), "write logs to stderr") {
		t.Fatalf("a JSON log line on stdout: the command's fatal error is %v", c.Fatal())
	}
}

// crashAt crashes every call that hits point.
type crashAt string

func (c crashAt) Hit(_ context.Context, name string) error {
	if name == string(c) {
		return faults.ErrCrashed
	}
	return nil
}

// holdAt parks every call that hits point until release is closed.
type holdAt struct {
	point   string
	reached chan struct{}
	release chan struct{}
}

func (h holdAt) Hit(ctx context.Context, name string) error {
	if name != h.point {
		return nil
	}
	h.reached <- struct{}{}
	<-h.release
	return nil
}

// TestCrashAtFailpoint: a crash at a store's failpoint kills its process
// there; the calls in flight with it end with an unknown outcome
// (ErrDied), and the next call starts the store again.
func TestCrashAtFailpoint(t *testing.T) {
	c, err := execstore.Probe(context.Background(), line("memory"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Open(context.Background(), "", stores.Config{LockTTL: time.Second, Retention: time.Hour, Variant: "select-then-insert"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	h := holdAt{point: faults.BeginAfterSelect, reached: make(chan struct{}), release: make(chan struct{})}
	var wg sync.WaitGroup
	var parkedErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, parkedErr = st.Begin(faults.WithHandler(context.Background(), h), stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: "parked"}, Fingerprint: "f", Now: now})
	}()
	<-h.reached
	_, err = st.Begin(faults.WithHandler(context.Background(), crashAt(faults.BeginAfterSelect)), stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: "k"}, Fingerprint: "f", Now: now})
	if !errors.Is(err, faults.ErrCrashed) {
		t.Fatalf("the crashed call returned %v, want ErrCrashed", err)
	}
	close(h.release)
	wg.Wait()
	if !errors.Is(parkedErr, execstore.ErrDied) || errors.Is(parkedErr, stores.ErrProcessDied) {
		t.Fatalf("the call parked in the killed process returned %v, want ErrDied and not ErrProcessDied (the harness's crash killed it)", parkedErr)
	}
	d, err := st.Begin(context.Background(), stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: "k"}, Fingerprint: "f", Now: now})
	if err != nil || d.Outcome != stores.Claimed {
		t.Fatalf("after the crash, a new process: %v, %v (want claimed: the data lived in the killed process)", d.Outcome, err)
	}
}

// dyingAt is a store whose process exits, as a store with a bug may, at
// its at-th Begin, before it answers.
type dyingAt struct {
	stores.Store
	n, at int
}

func (d *dyingAt) Begin(ctx context.Context, req stores.Request) (stores.Decision, error) {
	if d.n++; d.n == d.at {
		fmt.Fprintln(os.Stderr, "Traceback: KeyError: 'token'")
		os.Exit(3)
	}
	return d.Store.Begin(ctx, req)
}

// TestDiesOnItsOwn: a store process that exits on its own mid-call ends
// that call with stores.ErrProcessDied (its exit and stderr said), which
// a run counts and reports; the next call starts the store again. A
// crash the harness injects is not such a death (TestCrashAtFailpoint).
func TestDiesOnItsOwn(t *testing.T) {
	c, err := execstore.Probe(context.Background(), line("dying"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Open(context.Background(), "", stores.Config{LockTTL: time.Second, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	begin := func(key string) error {
		_, err := st.Begin(context.Background(), stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: key}, Fingerprint: "f", Now: time.Now()})
		return err
	}
	for _, k := range []string{"a", "b"} {
		if err := begin(k); err != nil {
			t.Fatalf("Begin %s: %v", k, err)
		}
	}
	err = begin("c")
	if !errors.Is(err, stores.ErrProcessDied) || !errors.Is(err, execstore.ErrDied) {
		t.Fatalf("the Begin its process died in returned %v, want ErrProcessDied and ErrDied", err)
	}
	if !strings.HasPrefix(err.Error(), stores.ErrProcessDied.Error()) || !strings.Contains(err.Error(), "KeyError") {
		t.Errorf("the error %q should lead with ErrProcessDied's text (a history's errors are text) and name the stderr's cause", err)
	}
	if err := begin("d"); err != nil {
		t.Fatalf("after the death, a new process: %v", err)
	}
	if n, first := st.(stores.Restarter).Deaths(); n != 1 || !strings.Contains(first, "KeyError") {
		t.Errorf("Deaths() = %d, %q; want 1 and its cause", n, first)
	}
}

// TestOutOfOrder: many calls in flight at once on one process, answered
// in the order the store finishes them: one parked at a failpoint does
// not hold the others up.
func TestOutOfOrder(t *testing.T) {
	c, err := execstore.Probe(context.Background(), line("memory"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Open(context.Background(), "", stores.Config{LockTTL: time.Second, Retention: time.Hour, Variant: "select-then-insert"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	h := holdAt{point: faults.BeginAfterSelect, reached: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := st.Begin(faults.WithHandler(context.Background(), h), stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: "slow"}, Fingerprint: "f", Now: now})
		done <- err
	}()
	<-h.reached
	var wg sync.WaitGroup
	var claimed atomic.Int64
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := st.Begin(context.Background(), stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: fmt.Sprint("k", i)}, Fingerprint: "f", Now: now})
			if err == nil && d.Outcome == stores.Claimed {
				claimed.Add(1)
			}
		}()
	}
	wg.Wait()
	if claimed.Load() != 50 {
		t.Fatalf("%d of 50 calls claimed while one was parked", claimed.Load())
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	row, err := st.(stores.RowShower).ShowRow(context.Background(), stores.KeyRef{Tenant: "t", Key: "slow"})
	if err != nil || !strings.Contains(row, "in_flight") {
		t.Fatalf("show: %q, %v", row, err)
	}
}

// cpuTime is the CPU time (user and system) this process and its reaped
// children have used.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// BenchmarkCalls: claims per second through the protocol against the same
// memory store called in its process, at 1 and 8 clients (goroutines
// calling at once). Each op is one Begin of a new key. cpu-µs/call is the
// CPU both processes spent per call (the store's process is counted once
// it has exited): calls/s on a loaded machine is bounded by the waits for
// a CPU, cpu-µs/call is not.
//
//	go test -run '^$' -bench Calls -benchtime 2s ./stores/execstore/
func BenchmarkCalls(b *testing.B) {
	cfg := stores.Config{LockTTL: time.Minute, Retention: time.Hour}
	run := func(b *testing.B, st stores.Store, clients int) {
		var seq atomic.Int64
		now := time.Now()
		var wg sync.WaitGroup
		b.ResetTimer()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					n := seq.Add(1)
					if n > int64(b.N) {
						return
					}
					k := fmt.Sprint("k", n)
					if _, err := st.Begin(context.Background(), stores.Request{KeyRef: stores.KeyRef{Tenant: "t", Key: k}, Fingerprint: "f", Now: now}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	}
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("in-process/clients=%d", clients), func(b *testing.B) {
			st, err := memory.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			t0 := cpuTime()
			run(b, st, clients)
			b.ReportMetric(float64((cpuTime()-t0).Microseconds())/float64(b.N), "cpu-µs/call")
		})
		b.Run(fmt.Sprintf("protocol/clients=%d", clients), func(b *testing.B) {
			c, err := execstore.Probe(context.Background(), line("memory"), nil)
			if err != nil {
				b.Fatal(err)
			}
			st, err := c.Open(context.Background(), "", cfg)
			if err != nil {
				b.Fatal(err)
			}
			t0 := cpuTime()
			run(b, st, clients)
			if err := st.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((cpuTime()-t0).Microseconds())/float64(b.N), "cpu-µs/call")
		})
	}
}
