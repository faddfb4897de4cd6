//go:build !unix

package check_test

import "time"

// cpuTime is 0 where getrusage is missing: the benchmark reports no CPU
// time.
func cpuTime() time.Duration { return 0 }
