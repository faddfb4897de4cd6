package sqlite

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemcheck/idemcheck/stores"
)

// TestManyCallsAtOnceStayWithinOpenFiles: thousands of replays at once,
// under a limit of open files a few hundred descriptors above what the
// test binary already holds, all answer. The pool opened a connection
// (and its files) per concurrent call, and a correct store answered
// "unable to open database file" past the process's limit.
func TestManyCallsAtOnceStayWithinOpenFiles(t *testing.T) {
	s := open(t, stores.Correct)
	k := key("many")
	tok := mustClaim(t, s, req(k, "amount=1", t0), false)
	if err := s.Complete(context.Background(), k, tok, stores.Response{Status: 201, Body: "ok"}); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count open files: %v", err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	limit := old
	limit.Cur = uint64(len(fds) + 3*maxConns + 64)
	if limit.Cur > old.Cur {
		t.Skipf("the limit of open files (%d) is already below the test's (%d)", old.Cur, limit.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Skipf("cannot lower the limit of open files: %v", err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)

	const calls = 3000
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := s.Begin(context.Background(), req(k, "amount=1", t0.Add(time.Second)))
			if err == nil && d.Outcome != stores.Replay {
				err = fmt.Errorf("outcome %v, want a replay", d.Outcome)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	failed, first := 0, error(nil)
	for err := range errs {
		if err != nil {
			if failed++; first == nil {
				first = err
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d replays at once failed under a limit of %d open files; first: %v", failed, calls, limit.Cur, first)
	}
	if st := s.db.Stats(); st.MaxOpenConnections > maxConns || st.MaxOpenConnections == 0 {
		t.Errorf("the pool may open %d connections, want at most %d", st.MaxOpenConnections, maxConns)
	}
}
