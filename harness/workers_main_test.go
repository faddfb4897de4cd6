package harness

import (
	"context"
	"math/rand"
	"os"
	"testing"
)

// TestMain lets this test binary serve as a worker process: the tests
// start it (os.Executable) with IDEMCHECK_WORKER=1, which runs WorkerMain
// instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(WorkerEnv) == "1" {
		os.Exit(WorkerMain(context.Background(), os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// testWorkerCommand is the worker command of this test binary.
func testWorkerCommand(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}
}

func newTestRand() *rand.Rand { return rand.New(rand.NewSource(1)) }
