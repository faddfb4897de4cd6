package main

import (
	"context"
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/idemcheck/idemcheck/harness/worker"
)

// TestMain lets this test binary serve as the harness's worker process:
// `idemcheck check` in a test starts os.Executable() (this binary) with
// the worker command and IDEMCHECK_WORKER=1, which must run the worker, not
// the tests again.
// It serves as the idemcheck command too, with cliEnv set: a test that
// kills a run's process starts one so.
// The tests marked parallel run waitingParallel at once unless -parallel
// says otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(worker.EnvVar) == "1" || os.Getenv(cliEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(waitingParallel))
	}
	os.Exit(m.Run())
}

// waitingParallel is how many of this package's parallel tests run at
// once by default: they spend their time waiting on the runs and
// services they start (an http run's fixed duration and settle, a killed
// run's journal), not computing, so more of them than go test's default
// of one per CPU share two cores well.
const waitingParallel = 4

// cliEnv set to "1" makes this test binary the idemcheck command.
const cliEnv = "IDEMCHECK_TEST_CLI"
