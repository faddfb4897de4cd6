//go:build unix

package historytest

import (
	"syscall"
	"time"
)

// CPUTime is the process's CPU time so far, user and system, of every
// thread.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
