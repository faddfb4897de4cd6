package main

import (
	"context"
	"os"
	"testing"

	"github.com/idemcheck/idemcheck/harness/worker"
)

// TestMain lets this test binary serve as the harness's worker process:
// `idemcheck check` in a test starts os.Executable() (this binary) with
// the worker command and IDEMCHECK_WORKER=1, which must run the worker, not
// the tests again.
// It serves as the idemcheck command too, with cliEnv set: a test that
// kills a run's process starts one so.
func TestMain(m *testing.M) {
	if os.Getenv(worker.EnvVar) == "1" || os.Getenv(cliEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// cliEnv set to "1" makes this test binary the idemcheck command.
const cliEnv = "IDEMCHECK_TEST_CLI"
