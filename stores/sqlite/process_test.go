package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/faults"
	"github.com/idemcheck/idemcheck/stores"
)

// The test binary re-executes itself as a child process: TestChildProcess
// does the work named by these environment variables and is skipped in a
// normal run.
const (
	envChild = "IDEMCHECK_SQLITE_CHILD" // "hammer" or "kill"
	envPath  = "IDEMCHECK_SQLITE_PATH"  // the database file
	envKeys  = "IDEMCHECK_SQLITE_KEYS"  // hammer: how many keys
	envStart = "IDEMCHECK_SQLITE_START" // hammer: Unix ns to start at, so children overlap
	envNow   = "IDEMCHECK_SQLITE_NOW"   // hammer: the Request.Now to use, ns after t0
)

const (
	childKeys       = 150
	childGoroutines = 4
)

func childKey(i int) stores.KeyRef {
	return stores.KeyRef{Tenant: "proc", Key: fmt.Sprintf("key-%04d\x00\xff", i)}
}

// startChild runs this test binary as a child doing mode.
func startChild(t *testing.T, mode, path string, env ...string) (*exec.Cmd, io.ReadCloser, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{envChild + "=" + mode, envPath + "=" + path}, env...)...)
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out, stderr
}

// TestMultiProcess: three processes, each with its own pool of connections
// and goroutines, Begin every key of one fresh file at once (they also race to
// create it). Each reports the keys it claimed; no key may be claimed twice,
// and none may go unclaimed. Then they do it again on the same file once every
// claim is stale: each key must be taken over exactly once.
func TestMultiProcess(t *testing.T) {
	path := dbPath(t)
	hammerProcesses(t, path, 0, false)
	hammerProcesses(t, path, lockTTL, true)
}

func hammerProcesses(t *testing.T, path string, now time.Duration, takeover bool) {
	start := time.Now().Add(300 * time.Millisecond).UnixNano()
	type child struct {
		cmd     *exec.Cmd
		claimed []string
		other   []string // the child's other output: a failing child's test log
		stderr  *bytes.Buffer
	}
	children := make([]*child, 3)
	var wg sync.WaitGroup
	for i := range children {
		cmd, out, stderr := startChild(t, "hammer", path, envKeys+"="+strconv.Itoa(childKeys),
			envStart+"="+strconv.FormatInt(start, 10), envNow+"="+strconv.FormatInt(int64(now), 10))
		c := &child{cmd: cmd, stderr: stderr}
		children[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				if k, ok := strings.CutPrefix(line, "claimed "); ok {
					if takeover {
						t.Errorf("fresh claim of %s, which had a stale claim", k)
					}
					c.claimed = append(c.claimed, k)
				} else if k, ok := strings.CutPrefix(line, "took over "); ok {
					if !takeover {
						t.Errorf("takeover of %s on a fresh file", k)
					}
					c.claimed = append(c.claimed, k)
				} else {
					c.other = append(c.other, line)
				}
			}
		}()
	}
	wg.Wait()
	owner := map[string]int{}
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s\n%s", i, err, strings.Join(c.other, "\n"), c.stderr)
		}
		for _, k := range c.claimed {
			if prev, dup := owner[k]; dup {
				t.Errorf("key %s claimed by child %d and child %d", k, prev, i)
			}
			owner[k] = i
		}
		t.Logf("takeover phase %v: child %d claimed %d keys", takeover, i, len(c.claimed))
	}
	if len(owner) != childKeys {
		t.Errorf("%d keys claimed, want all %d", len(owner), childKeys)
	}
}

// TestOpenWaitsForTheSwitchToWAL: New on a file that is not yet in WAL mode
// while another connection holds its write lock, as when processes create one
// file together. Switching to WAL upgrades a read to a write, which SQLite
// refuses at once (SQLITE_BUSY, no busy handler) while another writes; New
// must wait for the writer, as for any other lock, not fail.
func TestOpenWaitsForTheSwitchToWAL(t *testing.T) {
	path := dbPath(t)
	other, err := sql.Open("sqlite", path) // the default journal mode: DELETE
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The writer waits for readers as a store does (a busy timeout): its
	// COMMIT needs New's read lock gone, and without one it failed at
	// once while New held it, kept its own lock, and New waited in vain
	// (the race pass of a loaded CI run).
	for _, q := range []string{"PRAGMA busy_timeout = 10000", "CREATE TABLE other (x)", "BEGIN IMMEDIATE", "INSERT INTO other VALUES (1)"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const hold = 300 * time.Millisecond
	released := time.Now().Add(hold)
	committed := make(chan error, 1)
	go func() {
		time.Sleep(hold)
		_, err := conn.ExecContext(ctx, "COMMIT")
		committed <- err
	}()
	s, err := New(ctx, path, testConfig(""))
	if cerr := <-committed; cerr != nil {
		t.Fatalf("the other writer's COMMIT: %v", cerr)
	}
	if err != nil {
		t.Fatalf("New while another connection wrote (the writer committed %v in): %v", hold, err)
	}
	defer s.Close()
	if early := time.Until(released); early > 0 {
		t.Fatalf("New returned %v before the other writer committed", early)
	}
	mustClaim(t, s, req(key("k"), "fp", t0), false)
}

// TestKilledProcess: a child commits a claim and a completed key, then is
// killed with SIGKILL while inside Begin's transaction for a third key. On
// reopening, both commits are there, the third key left nothing behind, and
// the file is not left locked.
func TestKilledProcess(t *testing.T) {
	path := dbPath(t)
	cmd, out, stderr := startChild(t, "kill", path)
	sc := bufio.NewScanner(out)
	inside := false
	for !inside && sc.Scan() {
		inside = sc.Text() == "inside"
	}
	if !inside {
		err := cmd.Wait()
		t.Fatalf("child never got inside Begin's transaction (%v)\n%s", err, stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL (%v)\n%s", err, stderr)
	}

	s := openAt(t, path, "")
	// A bound on a lock the kill left held, well past the busy timeout
	// (which answers first), not a timing: 2 s was a stall CI's load
	// could reach.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := s.Begin(ctx, req(key("claimed"), "fp", t0.Add(time.Second)))
	if err != nil || d.Outcome != stores.InFlight {
		t.Fatalf("the killed process's claim: %+v, %v; want it still in flight", d, err)
	}
	d, err = s.Begin(ctx, req(key("done"), "fp", t0.Add(time.Second)))
	if err != nil || d.Outcome != stores.Replay || d.Response.Body != "saved before the kill" {
		t.Fatalf("the killed process's completed key: %+v, %v; want its response replayed", d, err)
	}
	d, err = s.Begin(ctx, req(key("mid-transaction"), "fp", t0.Add(time.Second)))
	if err != nil || d.Outcome != stores.Claimed || d.Takeover {
		t.Fatalf("the key killed mid-transaction: %+v, %v; want a fresh claim", d, err)
	}
	// The claim the dead process left is taken over once stale.
	mustClaim(t, s, req(key("claimed"), "fp", t0.Add(lockTTL)), true)
}

// TestChildProcess is the child's side of the tests above.
func TestChildProcess(t *testing.T) {
	mode := os.Getenv(envChild)
	if mode == "" {
		t.Skip("runs only as a child process of TestMultiProcess and TestKilledProcess")
	}
	path := os.Getenv(envPath)
	ctx := context.Background()
	s, err := New(ctx, path, testConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	switch mode {
	case "hammer":
		n, _ := strconv.Atoi(os.Getenv(envKeys))
		start, _ := strconv.ParseInt(os.Getenv(envStart), 10, 64)
		now, _ := strconv.ParseInt(os.Getenv(envNow), 10, 64)
		time.Sleep(time.Until(time.Unix(0, start)))
		var mu sync.Mutex
		w := bufio.NewWriter(os.Stdout)
		var wg sync.WaitGroup
		for range childGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, i := range rand.Perm(n) {
					// A little think time between requests, as a real client
					// has: without it one process's back-to-back writes keep
					// the lock and the others mostly lose SQLite's polls.
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
					d, err := s.Begin(ctx, req(childKey(i), "fp", t0.Add(time.Duration(now))))
					if err != nil {
						t.Errorf("Begin(%s): %v", childKey(i), err)
						return
					}
					if d.Outcome == stores.Claimed {
						what := "claimed"
						if d.Takeover {
							what = "took over"
						}
						mu.Lock()
						fmt.Fprintf(w, "%s %q\n", what, childKey(i).Key)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		w.Flush()
	case "kill":
		mustClaim(t, s, req(key("claimed"), "fp", t0), false)
		tok := mustClaim(t, s, req(key("done"), "fp", t0), false)
		if err := s.Complete(ctx, key("done"), tok, stores.Response{Status: 200, Body: "saved before the kill"}); err != nil {
			t.Fatal(err)
		}
		hold := faults.WithHandler(ctx, faults.HandlerFunc(func(_ context.Context, name string) error {
			if name == faults.BeginBeforeCommit {
				fmt.Println("inside")
				select {} // wait for SIGKILL
			}
			return nil
		}))
		_, err := s.Begin(hold, req(key("mid-transaction"), "fp", t0))
		t.Fatalf("Begin returned (%v); it should have been killed inside", err)
	default:
		t.Fatalf("unknown child mode %q", mode)
	}
}
