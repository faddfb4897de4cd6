package idemtest

import "time"

// SetCutAfter sets how long a scenario may run at a lease past the wait
// budget before the suite cuts it (cutAfter), for a test.
func SetCutAfter(d time.Duration) { cutAfter = d }
