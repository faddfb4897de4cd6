package hunt_test

import (
	"testing"

	"github.com/idemcheck/idemcheck/harness/harnesstest"
)

// TestMain lets this test binary serve as a worker process.
func TestMain(m *testing.M) { harnesstest.Main(m) }
