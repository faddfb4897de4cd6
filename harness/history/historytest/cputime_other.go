//go:build !unix

package historytest

import "time"

// CPUTime is 0 where getrusage is missing: a benchmark reports no CPU
// time.
func CPUTime() time.Duration { return 0 }
